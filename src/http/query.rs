//! Query strings: `a=1&b=x%20y` into decoded pairs (`application/x-www-form-urlencoded`:
//! `+` is a space, `%XX` a byte; the decoded bytes must be UTF-8).
//!
//! Bounded by the request target's limit (`uri_bytes_max`); no other allocation than the
//! decoded values that differ from their raw text.

use std::borrow::Cow;

/// Iterates over the decoded pairs of `query`; a pair that does not decode is an `Err` naming
/// its raw name.
pub fn pairs(query: &str) -> impl Iterator<Item = Result<(Cow<'_, str>, Cow<'_, str>), String>> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match (decode(name), decode(value)) {
                (Some(name), Some(value)) => Ok((name, value)),
                _ => Err(format!(
                    "query parameter '{}' is not valid percent-encoded UTF-8",
                    truncate(name)
                )),
            }
        })
}

/// Reads `query` into `parsed`: `slot` gives the field a parameter fills (`None`: ignored,
/// or handled by `slot` itself). A parameter given twice is refused, as is a pair that does
/// not decode.
pub fn fill<T>(
    query: &str,
    parsed: &mut T,
    slot: for<'t> fn(&'t mut T, &str) -> Option<&'t mut Option<String>>,
) -> Result<(), String> {
    for pair in pairs(query) {
        let (name, value) = pair?;
        let Some(field) = slot(parsed, &name) else {
            continue;
        };
        if field.is_some() {
            return Err(format!("query parameter `{name}` given twice"));
        }
        *field = Some(value.into_owned());
    }
    Ok(())
}

fn truncate(text: &str) -> &str {
    crate::text::first_chars(text, 32)
}

/// Percent-decodes `text`; `None` for a bad escape or bytes that are not UTF-8.
pub fn decode(text: &str) -> Option<Cow<'_, str>> {
    if !text.bytes().any(|b| b == b'%' || b == b'+') {
        return Some(Cow::Borrowed(text));
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let value = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                out.push(value);
                i += 2;
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Default)]
    struct Two {
        a: Option<String>,
        b: Option<String>,
        flag: bool,
    }

    fn slot<'t>(two: &'t mut Two, name: &str) -> Option<&'t mut Option<String>> {
        match name {
            "a" => Some(&mut two.a),
            "b" => Some(&mut two.b),
            "flag" => {
                two.flag = true;
                None
            }
            _ => None,
        }
    }

    #[test]
    fn fill_sets_each_named_field_once() {
        let mut two = Two::default();
        fill("a=x%20y&other=1&flag&b=+", &mut two, slot).unwrap();
        assert_eq!(
            (two.a.as_deref(), two.b.as_deref(), two.flag),
            (Some("x y"), Some(" "), true)
        );
        let mut two = Two::default();
        let error = fill("a=1&a=2", &mut two, slot).unwrap_err();
        assert_eq!(error, "query parameter `a` given twice");
        let mut two = Two::default();
        assert!(fill("a=%FF", &mut two, slot).is_err());
        // Ignored names may repeat.
        let mut two = Two::default();
        fill("x=1&x=2", &mut two, slot).unwrap();
    }

    fn collect(query: &str) -> Vec<(String, String)> {
        pairs(query)
            .map(|pair| pair.map(|(a, b)| (a.into_owned(), b.into_owned())))
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn decodes() {
        assert_eq!(
            collect("a=1&b=x%20y+z&&c&url=http%3A%2F%2Fe.com%2F%3Fq%3D1"),
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "x y z".into()),
                ("c".into(), "".into()),
                ("url".into(), "http://e.com/?q=1".into()),
            ]
        );
        assert_eq!(collect("k=%C3%A9"), vec![("k".into(), "é".into())]);
    }

    #[test]
    fn refuses_bad_escapes() {
        for bad in ["a=%", "a=%4", "a=%zz", "a=%FF", "a=%+1"] {
            assert!(pairs(bad).any(|pair| pair.is_err()), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,64}") {
            for pair in pairs(&text) {
                let _ = pair;
            }
        }
    }
}
