//! The layering of `src/`, checked: every `crate::` path in the code (not in comments) is an
//! import, and imports run one way, down this list. A module may import modules of a lower
//! layer only, and the file-level import graph has no circle. Run alone with
//! `cargo test --test layers`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top to bottom. The request path (`api`) sits under the server and over everything it
/// uses; leaf modules at the bottom import no other module of the crate.
const LAYERS: &[&[&str]] = &[
    &["main", "cli"],
    &["client", "eval"],
    &["server"],
    &["fleet"],
    &["api"],
    &["logging"],
    &["config"],
    &["limits"],
    &["auth"],
    &["store"],
    &["journal"],
    &["decision"],
    &["workflow"],
    &["checks"],
    &["lists"],
    &["inference"],
    &["metrics"],
    &["download"],
    &["http"],
    &["image", "text"],
    &["route"],
    &[
        "content",
        "request_id",
        "clock",
        "bounds",
        "error",
        "hash",
        "codec",
    ],
];

fn layer_of(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|layer| layer.contains(&module))
        .unwrap_or_else(|| panic!("module `{module}` is in no layer of tests/layers.rs"))
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` -> `a` (the top-level module); `src/lib.rs` -> `lib`.
fn top_module(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("under src");
    let first = relative.components().next().expect("a component");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_owned()
}

/// Every `crate::` path of the code, as its segments (`crate::a::{b, c::d}` gives `[a, b]` and
/// `[a, c, d]`). Lines that are comments are skipped.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut paths = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `$crate::` or `my_crate::`
        }
        expand(rest, Vec::new(), &mut paths);
    }
    paths
}

fn expand(text: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(text.len());
    let mut path = prefix;
    path.extend(
        text[..end]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
    );
    if text[end..].starts_with('{') {
        let mut depth = 0;
        let mut close = text.len();
        for (i, c) in text[end..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = end + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let inner = &text[end + 1..close];
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(inner[start..i].trim(), path.clone(), out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(inner[start..].trim(), path, out);
    } else if !path.is_empty() {
        out.push(path);
    }
}

/// The file a path names: the longest prefix of it that is a module file.
fn file_of(src: &Path, path: &[String]) -> Option<PathBuf> {
    for len in (1..=path.len()).rev() {
        let joined: PathBuf = path[..len].iter().collect();
        for candidate in [
            src.join(&joined).with_extension("rs"),
            src.join(&joined).join("mod.rs"),
        ] {
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

fn graph() -> (PathBuf, BTreeMap<PathBuf, BTreeSet<PathBuf>>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        let targets = edges.entry(file.clone()).or_default();
        for path in crate_paths(&text) {
            if let Some(target) = file_of(&src, &path) {
                if &target != file {
                    targets.insert(target);
                }
            }
        }
    }
    (src, edges)
}

#[test]
fn imports_run_down_the_layers() {
    let (src, edges) = graph();
    let mut wrong = Vec::new();
    for (file, targets) in &edges {
        let from = top_module(&src, file);
        if from == "lib" {
            continue;
        }
        for target in targets {
            let to = top_module(&src, target);
            if to != from && layer_of(&to) <= layer_of(&from) {
                wrong.push(format!(
                    "{} imports {} (`{from}` may not import `{to}`)",
                    file.strip_prefix(&src).unwrap().display(),
                    target.strip_prefix(&src).unwrap().display()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_file_graph_has_no_circle() {
    let (src, edges) = graph();
    // Depth-first search with colours: grey = on the current path.
    #[derive(Clone, Copy, PartialEq)]
    enum Colour {
        White,
        Grey,
        Black,
    }
    let mut colour: BTreeMap<&PathBuf, Colour> = edges.keys().map(|f| (f, Colour::White)).collect();
    let mut circle: Option<Vec<PathBuf>> = None;
    fn visit<'a>(
        file: &'a PathBuf,
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        colour: &mut BTreeMap<&'a PathBuf, Colour>,
        stack: &mut Vec<&'a PathBuf>,
        circle: &mut Option<Vec<PathBuf>>,
    ) {
        colour.insert(file, Colour::Grey);
        stack.push(file);
        for target in edges.get(file).into_iter().flatten() {
            match colour.get(target).copied().unwrap_or(Colour::Black) {
                Colour::Grey if circle.is_none() => {
                    let from = stack.iter().position(|f| *f == target).unwrap_or(0);
                    *circle = Some(stack[from..].iter().map(|f| (*f).clone()).collect());
                }
                Colour::White => visit(target, edges, colour, stack, circle),
                _ => {}
            }
        }
        stack.pop();
        colour.insert(file, Colour::Black);
    }
    for file in edges.keys() {
        if colour[file] == Colour::White {
            visit(file, &edges, &mut colour, &mut Vec::new(), &mut circle);
        }
    }
    if let Some(circle) = circle {
        let names: Vec<String> = circle
            .iter()
            .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
            .collect();
        panic!("a circle of imports: {}", names.join(" -> "));
    }
}

#[test]
fn the_path_reader_reads_groups_and_skips_comments() {
    let text =
        "//! see [`crate::server`]\nuse crate::a::{b, c::{d, e}};\nlet x = crate::f::g(1);\n";
    let paths = crate_paths(text);
    let strings: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(strings, ["a::b", "a::c::d", "a::c::e", "f::g"]);
}
