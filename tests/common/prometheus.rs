//! A strict reader of the Prometheus text format (0.0.4), for tests: it refuses what a lenient
//! scraper would let through, so that `/metrics` stays valid for every scraper.
//!
//! Checked: metric and label names; label values quoted with only `\\`, `\"` and `\n`
//! escapes; numeric values; one `# HELP` and one `# TYPE` per family, before its samples; a
//! family's samples together; no series twice; counters named `_total`; histograms with
//! `le` buckets in increasing order, cumulative counts that never go down, a `+Inf` bucket
//! equal to `_count`, and a `_sum`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

#[derive(Debug, Default)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    /// Family name to type.
    pub types: HashMap<String, String>,
}

impl Exposition {
    /// The value of the series `name{labels}` (labels given as `k=v` pairs), if present.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
    }

    /// Every series, as `name{k="v",...}`, for comparing label sets.
    pub fn series(&self) -> BTreeSet<String> {
        self.samples
            .iter()
            .map(|s| format!("{}{:?}", s.name, s.labels))
            .collect()
    }
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => text.parse().map_err(|_| format!("bad value '{text}'")),
    }
}

/// `{a="1",b="x\"y"}` after the name; returns the labels and the rest of the line.
fn parse_labels(text: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let Some(mut rest) = text.strip_prefix('{') else {
        return Ok((labels, text));
    };
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let eq = rest.find('=').ok_or("label without '='")?;
        let name = &rest[..eq];
        if !is_label_name(name) {
            return Err(format!("bad label name '{name}'"));
        }
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err("unterminated label value".into()),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?}")),
                },
                Some((_, '\n')) => return Err("raw newline in a label value".into()),
                Some((_, c)) => value.push(c),
            }
        };
        if labels.insert(name.to_owned(), value).is_some() {
            return Err(format!("label '{name}' twice"));
        }
        rest = &rest[end + 1..];
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err("labels not separated by ','".into());
        }
    }
}

/// The family a sample belongs to, given the declared types.
fn family_of<'a>(name: &'a str, types: &HashMap<String, String>) -> &'a str {
    if types.contains_key(name) {
        return name;
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if types.get(base).map(String::as_str) == Some("histogram") {
                return base;
            }
        }
    }
    name
}

/// Parses and checks `text`; the first problem is the error, with its line.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut exposition = Exposition::default();
    let mut helps = BTreeSet::new();
    let mut finished = BTreeSet::new();
    let mut current: Option<String> = None;
    let mut seen = BTreeSet::new();
    for (number, line) in text.lines().enumerate() {
        let at = |problem: String| format!("line {}: {problem}: {line}", number + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let words: Vec<&str> = comment.trim_start().splitn(3, ' ').collect();
            match words.as_slice() {
                ["HELP", name, _] | ["HELP", name]
                    if !is_metric_name(name) || !helps.insert(name.to_string()) =>
                {
                    return Err(at("bad or repeated HELP".into()));
                }
                ["TYPE", name, kind] => {
                    if !is_metric_name(name)
                        || !["counter", "gauge", "histogram", "summary", "untyped"].contains(kind)
                    {
                        return Err(at("bad TYPE".into()));
                    }
                    if exposition
                        .types
                        .insert(name.to_string(), kind.to_string())
                        .is_some()
                    {
                        return Err(at("TYPE twice".into()));
                    }
                    if *kind == "counter" && !name.ends_with("_total") {
                        return Err(at("a counter not named _total".into()));
                    }
                    if exposition
                        .samples
                        .iter()
                        .any(|s| family_of(&s.name, &exposition.types) == *name)
                    {
                        return Err(at("TYPE after the family's samples".into()));
                    }
                }
                _ => {}
            }
            continue;
        }
        let name_end = line.find(['{', ' ']).ok_or_else(|| at("no value".into()))?;
        let name = &line[..name_end];
        if !is_metric_name(name) {
            return Err(at("bad metric name".into()));
        }
        let (labels, rest) = parse_labels(&line[name_end..]).map_err(at)?;
        let mut fields = rest.split_whitespace();
        let value = parse_value(fields.next().ok_or_else(|| at("no value".into()))?).map_err(at)?;
        if let Some(timestamp) = fields.next() {
            timestamp
                .parse::<i64>()
                .map_err(|_| at("bad timestamp".into()))?;
        }
        if fields.next().is_some() {
            return Err(at("trailing fields".into()));
        }
        let family = family_of(name, &exposition.types).to_owned();
        if !exposition.types.contains_key(&family) {
            return Err(at("a sample without TYPE".into()));
        }
        if current.as_deref() != Some(family.as_str()) {
            if finished.contains(&family) {
                return Err(at("a family's samples are not together".into()));
            }
            if let Some(previous) = current.replace(family.clone()) {
                finished.insert(previous);
            }
        }
        if !seen.insert(format!("{name}{labels:?}")) {
            return Err(at("a series twice".into()));
        }
        exposition.samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    check_histograms(&exposition)?;
    Ok(exposition)
}

fn check_histograms(exposition: &Exposition) -> Result<(), String> {
    for (family, kind) in &exposition.types {
        if kind != "histogram" {
            continue;
        }
        // Label sets without `le`, each with its buckets in order of appearance.
        let mut sets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for sample in exposition
            .samples
            .iter()
            .filter(|s| s.name == format!("{family}_bucket"))
        {
            let mut labels = sample.labels.clone();
            let le = labels
                .remove("le")
                .ok_or(format!("{family}: a bucket without le"))?;
            sets.entry(format!("{labels:?}"))
                .or_default()
                .push((parse_value(&le)?, sample.value));
        }
        for (labels, buckets) in &sets {
            let inf = buckets
                .last()
                .ok_or(format!("{family}{labels}: no buckets"))?;
            if inf.0 != f64::INFINITY {
                return Err(format!("{family}{labels}: the last bucket is not +Inf"));
            }
            for pair in buckets.windows(2) {
                if pair[1].0 <= pair[0].0 || pair[1].1 < pair[0].1 {
                    return Err(format!("{family}{labels}: buckets out of order"));
                }
            }
            let find = |suffix: &str| {
                exposition
                    .samples
                    .iter()
                    .find(|s| {
                        s.name == format!("{family}{suffix}")
                            && format!("{:?}", s.labels) == *labels
                    })
                    .map(|s| s.value)
            };
            let count = find("_count").ok_or(format!("{family}{labels}: no _count"))?;
            find("_sum").ok_or(format!("{family}{labels}: no _sum"))?;
            if count != inf.1 {
                return Err(format!(
                    "{family}{labels}: +Inf bucket {} but _count {count}",
                    inf.1
                ));
            }
        }
    }
    Ok(())
}
