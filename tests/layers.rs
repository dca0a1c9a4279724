//! The layering of `src/`, checked: every path of the code (not of its comments or literals)
//! that names a module of the crate is an import (`crate::`, `super::` and `self::` paths, and
//! a declared child module's), and imports run one way, down this list. A module may import
//! modules of a lower layer only, and the file-level import graph has no circle, inside a
//! folder as between them. Run alone with `cargo test --test layers`.

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
    &["judgement"],
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

/// The code of a file with its comments, string and character literals blanked (each
/// character replaced by a space, line breaks kept), so that paths and braces are read from
/// the code alone.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let previous_is_word = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && next == Some('r'))) && !previous_is_word && {
            let at = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[at..].iter().take_while(|&&h| h == '#').count();
            chars.get(at + hashes) == Some(&'"')
        } {
            // A raw string: r#"..."# with any number of hashes.
            let at = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[at..].iter().take_while(|&&h| h == '#').count();
            let body = at + hashes + 1;
            let mut j = body;
            while j < chars.len() {
                if chars[j] == '"'
                    && chars[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &skipped in &chars[i..j.min(chars.len())] {
                blank(&mut out, skipped);
            }
            i = j;
        } else if c == '"' {
            blank(&mut out, c);
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            if i < chars.len() {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'), or a lifetime ('a), which stays.
            let close = if next == Some('\\') {
                chars[i + 2..]
                    .iter()
                    .position(|&q| q == '\'')
                    .map(|p| i + 2 + p)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(close) => {
                    for &skipped in &chars[i..=close] {
                        blank(&mut out, skipped);
                    }
                    i = close + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// A file's module path from the crate root: `src/a/b.rs` and `src/a/b/mod.rs` give `[a, b]`,
/// `src/lib.rs` (and `src/main.rs`) `[]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let mut path: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        path.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        path.pop();
    }
    path
}

/// Every path of the code that names a module of this crate, made absolute (segments from the
/// crate root): `crate::` paths, `super::` and `self::` paths read from the module they are
/// written in (inline modules such as `mod tests { .. }` included), and paths that start with
/// a child module the file declares (`mod x;` then `x::f()`). `crate::a::{b, c::d}` gives
/// `[a, b]` and `[a, c, d]`. Comments and literals are skipped.
fn module_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let code = code_only(text);
    let bytes = code.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut children: BTreeSet<String> = BTreeSet::new();
    for line in code.lines() {
        let line = line.trim();
        let line = line
            .strip_prefix("pub(crate) ")
            .or_else(|| line.strip_prefix("pub "))
            .unwrap_or(line);
        if let Some(name) = line
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'))
        {
            children.insert(name.trim().to_owned());
        }
    }
    // The inline modules open at each point: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut paths = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'{' {
            depth += 1;
            i += 1;
            continue;
        }
        if b == b'}' {
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
            depth = depth.saturating_sub(1);
            i += 1;
            continue;
        }
        if !word(b) || (i > 0 && (word(bytes[i - 1]) || bytes[i - 1] == b'$')) {
            i += 1;
            continue;
        }
        let end = (i..bytes.len())
            .find(|&j| !word(bytes[j]))
            .unwrap_or(bytes.len());
        let ident = &code[i..end];
        if ident == "mod" {
            let rest = code[end..].trim_start();
            let name_end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if rest[name_end..].trim_start().starts_with('{') {
                inline.push((rest[..name_end].to_owned(), depth + 1));
            }
        }
        let after_colons = i >= 2 && &code[i - 2..i] == "::";
        let starts_path = code[end..].starts_with("::")
            && !after_colons
            && (matches!(ident, "crate" | "super" | "self")
                || (inline.is_empty() && children.contains(ident)));
        if starts_path {
            let mut here: Vec<String> = module.to_vec();
            here.extend(inline.iter().map(|(name, _)| name.clone()));
            let mut found = Vec::new();
            expand(&code[i..], Vec::new(), &mut found);
            for relative in found {
                paths.push(absolute(&here, &relative));
            }
        }
        i = end;
    }
    paths
}

/// A path written in module `here` made absolute: leading `crate`, `super` and `self` resolved,
/// a `self` inside a group (`a::{self, b}`) dropped.
fn absolute(here: &[String], relative: &[String]) -> Vec<String> {
    let mut base: Vec<String> = here.to_vec();
    let mut rest = relative;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        _ => {}
    }
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    base
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
                    let item = inner[start..i].trim();
                    if !item.is_empty() {
                        expand(item, path.clone(), out);
                    }
                    start = i + 1;
                }
                _ => {}
            }
        }
        // A group's trailing comma leaves an empty last item: not a path.
        let item = inner[start..].trim();
        if !item.is_empty() {
            expand(item, path, out);
        }
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
        for path in module_paths(&text, &module_of(&src, file)) {
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

/// The circles of the graph: its strongly connected components of more than one file
/// (Tarjan's algorithm), each sorted.
fn circles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct Search<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(file: &'a PathBuf, search: &mut Search<'a>) {
        let number = search.index.len();
        search.index.insert(file, number);
        search.low.insert(file, number);
        search.stack.push(file);
        search.on_stack.insert(file);
        for target in search.edges.get(file).into_iter().flatten() {
            if !search.index.contains_key(target) {
                visit(target, search);
                let low = search.low[file].min(search.low[target]);
                search.low.insert(file, low);
            } else if search.on_stack.contains(target) {
                let low = search.low[file].min(search.index[target]);
                search.low.insert(file, low);
            }
        }
        if search.low[file] == search.index[file] {
            let mut component = Vec::new();
            while let Some(member) = search.stack.pop() {
                search.on_stack.remove(member);
                component.push(member.clone());
                if member == file {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                search.found.push(component);
            }
        }
    }
    let mut search = Search {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for file in edges.keys() {
        if !search.index.contains_key(file) {
            visit(file, &mut search);
        }
    }
    search.found.sort();
    search.found
}

/// Folders whose files still import one another in a circle, all of it inside the folder:
/// `checks/` (each check's code is handed the whole `TextModels` and the registry's `Check`,
/// while the registry and `TextModels` name every check). It goes when a check becomes a
/// folder that owns its models and findings. No other circle is tolerated, and no circle may
/// leave its folder.
const CIRCLES_BEING_TAKEN_APART: &[&str] = &["checks"];

#[test]
fn the_file_graph_has_no_circle() {
    let (src, edges) = graph();
    let found: Vec<Vec<PathBuf>> = circles(&edges)
        .into_iter()
        .filter(|component| {
            let folders: BTreeSet<String> = component.iter().map(|f| top_module(&src, f)).collect();
            !(folders.len() == 1
                && folders
                    .iter()
                    .all(|folder| CIRCLES_BEING_TAKEN_APART.contains(&folder.as_str())))
        })
        .collect();
    let described: Vec<String> = found
        .iter()
        .map(|component| {
            let names: Vec<String> = component
                .iter()
                .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
                .collect();
            format!("  {}", names.join(", "))
        })
        .collect();
    assert!(
        found.is_empty(),
        "{} circles of imports between files (each line: files that import one another, \
         directly or through each other):\n{}",
        found.len(),
        described.join("\n")
    );
}

#[test]
fn the_folders_with_a_circle_still_have_one() {
    // When a folder's circle is gone, it leaves the list, so that no new one can come back.
    let (src, edges) = graph();
    let with_circle: BTreeSet<String> = circles(&edges)
        .iter()
        .flat_map(|component| component.iter().map(|f| top_module(&src, f)))
        .collect();
    for folder in CIRCLES_BEING_TAKEN_APART {
        assert!(
            with_circle.contains(*folder),
            "src/{folder}/ has no circle any more: take it off CIRCLES_BEING_TAKEN_APART"
        );
    }
}

#[test]
fn the_path_reader_reads_groups_relative_paths_and_skips_comments_and_literals() {
    let text =
        "//! see [`crate::server`]\nuse crate::a::{b, c::{d, e},};\nlet x = crate::f::g(1);\n";
    let strings =
        |paths: Vec<Vec<String>>| -> Vec<String> { paths.iter().map(|p| p.join("::")).collect() };
    let module = |m: &[&str]| -> Vec<String> { m.iter().map(|s| (*s).to_owned()).collect() };
    assert_eq!(
        strings(module_paths(text, &module(&["top"]))),
        ["a::b", "a::c::d", "a::c::e", "f::g"]
    );
    // Relative paths, read from the module they are written in; a child module's bare path.
    let text = "mod child;\nuse super::sibling::{self, Thing};\nfn f() { self::inner::g(); \
                super::super::up::h(); child::k(); other::child::m(); }\n";
    assert_eq!(
        strings(module_paths(text, &module(&["a", "b"]))),
        [
            "a::sibling",
            "a::sibling::Thing",
            "a::b::inner::g",
            "up::h",
            "a::b::child::k"
        ]
    );
    // An inline module's `super` is the file's own module; literals and comments are not code.
    let text = "const S: &str = \"crate::x::y {\";\nlet c = '{';\n/* crate::z */\n\
                #[cfg(test)]\nmod tests {\n    use super::*;\n    fn t() { super::helper(); }\n}\n\
                fn after() { super::p::q(); }\n";
    assert_eq!(
        strings(module_paths(text, &module(&["a", "b"]))),
        ["a::b", "a::b::helper", "a::p::q"]
    );
}

#[test]
fn a_circle_between_two_files_is_found() {
    let file = |name: &str| PathBuf::from(name);
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    edges
        .entry(file("a/mod.rs"))
        .or_default()
        .insert(file("a/x.rs"));
    edges
        .entry(file("a/x.rs"))
        .or_default()
        .insert(file("a/y.rs"));
    edges
        .entry(file("a/y.rs"))
        .or_default()
        .insert(file("a/mod.rs"));
    edges
        .entry(file("b.rs"))
        .or_default()
        .insert(file("a/x.rs"));
    assert_eq!(
        circles(&edges),
        [vec![file("a/mod.rs"), file("a/x.rs"), file("a/y.rs")]]
    );
    edges.get_mut(&file("a/y.rs")).unwrap().clear();
    assert!(circles(&edges).is_empty());
}
