//! `links`: links to other places in a text (category `link`), found by a scanner (no model
//! exists for it, and a link is a fact of the text, not a judgement).
//!
//! What counts as a link, and its score (how sure the scanner is that it is one):
//! - a URL with a scheme, `http://`, `https://` or `ftp://` (any case), then a host: 0.95;
//! - a host starting with `www.` and at least two more labels: 0.95 (a typo can look like
//!   either, so neither is 1);
//! - a bare host name, `label.label…tld`, whose top-level domain is one of [`BARE_TLDS`]: 0.9.
//!   Only these, because file names and abbreviations look like host names under the
//!   country domains of programming languages and words (`main.rs`, `setup.py`, `that.it`);
//!   the list keeps the domains link spam uses, and the shorteners' (`t.me`, `bit.ly`, `t.co`).
//!
//! A link ends at a space, a quote, `<`, `>` or any character outside ASCII; trailing
//! punctuation (`.,;:!?` and closing brackets) is not part of it. A host name right after `@`
//! is an e-mail address (the `pii` check's), and one inside a longer dotted name or word is
//! not a link. Host names are ASCII: an internationalised name is seen in its `xn--` form.

pub const SOURCE: &str = "links";
pub const CATEGORY: &str = "link";
/// The score of a URL with a scheme or a `www.` host (a typo can look like one, so not 1).
pub const SCHEME_SCORE: f64 = 0.95;
/// The score of a bare host name.
pub const BARE_SCORE: f64 = 0.9;

/// Top-level domains a bare host name is a link under: the generic ones, and the country
/// domains most used for sites and short links, without those that collide with common
/// words or file extensions (`in`, `it`, `is`, `no`, `py`, `rs`, `md`, `sh`, `js` …).
pub const BARE_TLDS: &[&str] = &[
    "ai", "app", "ar", "at", "au", "be", "biz", "blog", "br", "ca", "cc", "ch", "click", "cn",
    "co", "com", "cz", "de", "dev", "dk", "edu", "es", "eu", "fi", "fr", "gg", "gov", "gr", "hk",
    "hu", "ie", "info", "io", "jp", "kr", "link", "live", "ly", "me", "mil", "mx", "net", "nl",
    "nz", "online", "org", "page", "pe", "ph", "pl", "pt", "ro", "ru", "se", "sg", "shop", "site",
    "store", "tech", "th", "top", "tr", "tv", "tw", "ua", "uk", "us", "vn", "ws", "xyz", "za",
];

pub const CHECK: super::registry::Check = super::registry::Check {
    name: SOURCE,
    kind: crate::content::ContentKind::Text,
    categories: &[CATEGORY],
    languages: None,
    runner: super::registry::Runner::Text {
        score: |input, _, board| board.add(CATEGORY, score(input.raw), SOURCE),
        reads_normalised: false,
    },
};

/// A link in a text: its byte range and score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    pub start: usize,
    pub end: usize,
    pub score: f64,
}

/// The best score of a link in `text`, or 0.
pub fn score(text: &str) -> f64 {
    let mut best = 0.0f64;
    for link in links(text) {
        best = best.max(link.score);
        if best >= SCHEME_SCORE {
            break;
        }
    }
    best
}

/// The links of `text`, in order.
pub fn links(text: &str) -> impl Iterator<Item = Link> + '_ {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() {
            let found = link_at(bytes, at);
            match found {
                Some(link) => {
                    at = link.end.max(at + 1);
                    return Some(link);
                }
                None => at = skip_token(bytes, at),
            }
        }
        None
    })
}

/// The link starting at `at`, if one does.
fn link_at(bytes: &[u8], at: usize) -> Option<Link> {
    if !bytes[at].is_ascii_alphanumeric() || !starts_token(bytes, at) {
        return None;
    }
    let rest = &bytes[at..];
    let scheme = ["http://", "https://", "ftp://"]
        .iter()
        .find(|scheme| starts_with_ignore_case(rest, scheme.as_bytes()))
        .map(|scheme| scheme.len());
    if let Some(scheme) = scheme {
        let host = host_len(&rest[scheme..]);
        if host == 0 {
            return None;
        }
        return Some(Link {
            start: at,
            end: at + scheme + host + tail_len(&rest[scheme + host..]),
            score: SCHEME_SCORE,
        });
    }
    let host = host_len(rest);
    if host == 0 || host_ends_inside_a_word(bytes, at + host) {
        return None;
    }
    let name = &rest[..host];
    let labels = name.split(|&b| b == b'.').count();
    let tld = name.rsplit(|&b| b == b'.').next().unwrap_or_default();
    let score = if starts_with_ignore_case(name, b"www.") && labels >= 3 {
        SCHEME_SCORE
    } else if labels >= 2
        && BARE_TLDS
            .iter()
            .any(|known| known.as_bytes().eq_ignore_ascii_case(tld))
    {
        BARE_SCORE
    } else {
        return None;
    };
    Some(Link {
        start: at,
        end: at + host + tail_len(&rest[host..]),
        score,
    })
}

/// Whether `at` begins a token: the start of the text, or after a character that cannot be
/// part of a host name or an address (`@`: an e-mail's domain; `.`, `/`, `-`: the middle of
/// a longer name or path).
fn starts_token(bytes: &[u8], at: usize) -> bool {
    at == 0 || {
        let before = bytes[at - 1];
        !(before.is_ascii_alphanumeric() || matches!(before, b'@' | b'.' | b'/' | b'-' | b'_'))
    }
}

/// Past the token that starts at `at` (letters, digits and the characters of a name), or one
/// byte on.
fn skip_token(bytes: &[u8], at: usize) -> usize {
    let mut end = at;
    while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
        end += 1;
    }
    end.max(at + 1)
}

/// The length of the host name at the start of `rest`: labels of letters, digits and `-`
/// (not at a label's ends), joined by single dots; a trailing dot is not part of it.
fn host_len(rest: &[u8]) -> usize {
    let mut end = 0;
    let mut i = 0;
    loop {
        let start = i;
        while i < rest.len() && (rest[i].is_ascii_alphanumeric() || rest[i] == b'-') {
            i += 1;
        }
        if i == start || i - start > 63 || rest[start] == b'-' || rest[i - 1] == b'-' {
            return end;
        }
        end = i;
        if i + 1 < rest.len() && rest[i] == b'.' && rest[i + 1].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        return end;
    }
}

/// Whether the host name ending at `end` goes on as a word or an address (`name.com@x`,
/// `a.com_b`): then it is not a link on its own.
fn host_ends_inside_a_word(bytes: &[u8], end: usize) -> bool {
    bytes
        .get(end)
        .is_some_and(|&b| matches!(b, b'@' | b'_') || b.is_ascii_alphanumeric())
}

/// The length of the port, path, query and fragment after a host: printable ASCII up to a
/// space, a quote or an angle bracket, without trailing punctuation.
fn tail_len(rest: &[u8]) -> usize {
    if !rest
        .first()
        .is_some_and(|&b| matches!(b, b'/' | b':' | b'?' | b'#'))
    {
        return 0;
    }
    let mut end = rest
        .iter()
        .position(|&b| !b.is_ascii_graphic() || matches!(b, b'"' | b'\'' | b'<' | b'>' | b'`'))
        .unwrap_or(rest.len());
    while end > 0
        && matches!(
            rest[end - 1],
            b'.' | b',' | b';' | b':' | b'!' | b'?' | b')' | b']' | b'}'
        )
    {
        end -= 1;
    }
    end
}

fn starts_with_ignore_case(bytes: &[u8], prefix: &[u8]) -> bool {
    bytes.len() >= prefix.len() && bytes[..prefix.len()].eq_ignore_ascii_case(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn found(text: &str) -> Vec<(&str, f64)> {
        links(text)
            .map(|link| (&text[link.start..link.end], link.score))
            .collect()
    }

    #[test]
    fn urls_hosts_and_short_links_are_found_whole() {
        assert_eq!(
            found("see https://Example.com/a/b?c=1#d, or HTTP://x.y."),
            [
                ("https://Example.com/a/b?c=1#d", 0.95),
                ("HTTP://x.y", 0.95)
            ]
        );
        assert_eq!(
            found("(www.example.org/page) and t.me/channel!"),
            [("www.example.org/page", 0.95), ("t.me/channel", 0.9)]
        );
        assert_eq!(
            found("buy at cheap-pills.xyz now"),
            [("cheap-pills.xyz", 0.9)]
        );
        assert_eq!(
            found("http://127.0.0.1:8080/x"),
            [("http://127.0.0.1:8080/x", 0.95)]
        );
        assert_eq!(found("go to bit.ly/3xYz"), [("bit.ly/3xYz", 0.9)]);
    }

    #[test]
    fn names_that_are_not_links_are_left() {
        for text in [
            "write to jane@example.com",
            "run main.rs and setup.py",
            "e.g. this, i.e. that",
            "version 1.2.3",
            "that.it works",
            "www.example",
            "http://",
            "https://-bad.com",
            "a.com_b",
            "the file report.pdf",
            "U.S.A.",
            "",
        ] {
            assert_eq!(found(text), [], "{text}");
            assert_eq!(score(text), 0.0, "{text}");
        }
    }

    #[test]
    fn the_best_score_is_the_checks() {
        assert_eq!(score("example.com and https://x.org"), 0.95);
        assert_eq!(score("example.com"), 0.9);
    }

    proptest! {
        #[test]
        fn links_lie_inside_the_text_in_order(text in "\\PC{0,200}") {
            let mut last_end = 0;
            for link in links(&text) {
                prop_assert!(link.start >= last_end && link.start < link.end);
                prop_assert!(link.end <= text.len());
                prop_assert!(text.is_char_boundary(link.start) && text.is_char_boundary(link.end));
                last_end = link.end;
            }
        }

        #[test]
        fn url_soup_never_panics(text in "[a-z0-9./:@_ -]{0,120}") {
            let _ = score(&text);
        }
    }
}
