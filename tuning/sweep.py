#!/usr/bin/env python3
"""Sweep one modgate setting with the load tool and write a table.

For each value: start `modgate serve` on a profile with SETTING = value (on --server-cpus),
create a key, run `modgate-load --server-pid` (on --load-cpu) at a fixed rate or with
--find-max (it reads the server's CPU time over the measured window from /proc), stop the
server. One row per value:

    value | throughput/s | p50 | p90 | p99 | p99.9 | max | errors | server CPU µs/request

Examples (after `make fetch && cargo build --release --workspace`):

    tuning/sweep.py inference.batch_rows_max 1,4,16,32 --scenario mixed-image --rate 20
    tuning/sweep.py journal.sync '"interval"','"always"' --scenario default-text --rate 2000
    tuning/sweep.py server.spin_before_park_us 0,50,200 --scenario default-text --find-max 5ms

Values are TOML (quote strings). The table goes to stdout and to tuning/results/.
"""

import argparse
import datetime
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release"


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    raise SystemExit(f"cannot write {value!r} as TOML")


def write_toml(table, prefix=""):
    """Tables of scalars, nested: enough for modgate's configuration."""
    lines = []
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
    if prefix and scalars:
        lines.append(f"[{prefix}]")
    for key, value in scalars.items():
        lines.append(f"{key} = {toml_value(value)}")
    for key, value in table.items():
        if isinstance(value, dict):
            lines.append(write_toml(value, f"{prefix}.{key}" if prefix else key))
    return "\n".join(lines) + "\n"


def start_server(config_path, data, cpus):
    command = ["taskset", "-c", cpus, str(BIN / "modgate"), "serve", "--config", str(config_path),
               "--data", str(data), "--listen", "127.0.0.1:0", "--metrics-listen", "off",
               "--models", str(ROOT / "models")]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in server.stdout:
        match = re.match(r"modgate listening on (http://\S+)", line)
        if match:
            return server, match.group(1)
    raise SystemExit("the server did not start")


def health(url):
    import urllib.request
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("the server never became healthy")


def ms(us):
    return f"{us / 1000:.2f} ms"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("setting", help="section.field, e.g. inference.batch_rows_max")
    parser.add_argument("values", help="comma-separated TOML values")
    parser.add_argument("--profile", default=str(ROOT / "tuning/profiles/loadtest.toml"))
    parser.add_argument("--scenario", default="default-text")
    parser.add_argument("--rate", type=float, help="open-loop rate (default: --find-max)")
    parser.add_argument("--find-max", dest="p99", help="p99 target for --find-max, e.g. 50ms")
    parser.add_argument("--duration", default="20s")
    parser.add_argument("--server-cpus", default="0")
    parser.add_argument("--load-cpu", default="1")
    parser.add_argument("--cores", type=int, default=1, help="server shards")
    args = parser.parse_args()
    if (args.rate is None) == (args.p99 is None):
        raise SystemExit("give --rate R or --find-max P99")

    section, field = args.setting.rsplit(".", 1)
    base = tomllib.loads(pathlib.Path(args.profile).read_text())
    rows = []
    for raw in args.values.split(","):
        value = tomllib.loads(f"v = {raw}")["v"]
        config = json.loads(json.dumps(base))
        target = config
        for part in section.split("."):
            target = target.setdefault(part, {})
        target[field] = value
        config.setdefault("server", {})["cores"] = args.cores
        work = pathlib.Path(tempfile.mkdtemp(prefix="modgate-sweep-"))
        config_path = work / "modgate.toml"
        config_path.write_text(write_toml(config))
        server, url = start_server(config_path, work / "data", args.server_cpus)
        try:
            health(url)
            key = subprocess.run([str(BIN / "modgate"), "key", "create", "--org", "demo", "--data", str(work / "data")],
                                 capture_output=True, text=True, check=True).stdout.splitlines()[0]
            subprocess.run([str(BIN / "modgate"), "org", "set-plan", "demo", "pro", "--data", str(work / "data")],
                           capture_output=True, check=True)
            report_path = work / "report.json"
            command = [str(BIN / "modgate-load"), "--server", url, "--key", key, "--scenario", args.scenario,
                       "--cpu", args.load_cpu, "--quiet", "--json", str(report_path),
                       "--server-pid", str(server.pid)]
            if args.rate is not None:
                command += ["--rate", str(args.rate), "--duration", args.duration]
            else:
                command += ["--find-max", "--p99", args.p99, "--step", args.duration]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            report = json.loads(report_path.read_text())
            if args.rate is None:
                report = report.get("best") or {}
            latency = report.get("latency", {})
            # The server's CPU over the measured window only (warm-up and drain left out), per
            # answer, as modgate-load measured it from the server's threads' schedstat.
            cpu = report.get("server_cpu_us_per_answer")
            rows.append([raw, f"{report.get('throughput_per_s', 0):.1f}", ms(latency.get("p50_us", 0)),
                         ms(latency.get("p90_us", 0)), ms(latency.get("p99_us", 0)), ms(latency.get("p999_us", 0)),
                         ms(latency.get("max_us", 0)), str(report.get("errors", "")),
                         "" if cpu is None else f"{cpu:.1f}"])
            print(" | ".join(rows[-1]), file=sys.stderr)
        finally:
            server.terminate()
            server.wait(timeout=30)
            shutil.rmtree(work, ignore_errors=True)
        time.sleep(1)

    mode = f"open loop at {args.rate}/s" if args.rate is not None else f"--find-max, p99 under {args.p99}"
    header = ["value", "throughput/s", "p50", "p90", "p99", "p99.9", "max", "errors", "server CPU µs/request"]
    lines = [f"# {args.setting}: scenario {args.scenario}, {mode}, {args.cores} shard(s) on CPU {args.server_cpus}, load on CPU {args.load_cpu}",
             "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    table = "\n".join(lines) + "\n"
    print(table)
    results = ROOT / "tuning" / "results"
    results.mkdir(exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    (results / f"sweep-{args.setting}-{stamp}.md").write_text(table)


if __name__ == "__main__":
    main()
