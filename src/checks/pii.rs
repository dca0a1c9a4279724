//! `pii`: personal data in a text, found by hand-written scanners (no model exists for it).
//!
//! Categories and what counts as a hit:
//! - `pii_email`: `local@domain.tld` with a dotted domain and a letter TLD.
//! - `pii_phone`: an international number (`+` or `00`, then 8 to 15 digits in groups), or a
//!   North American one written `(555) 123-4567`, `555-123-4567` or `555.123.4567`. Bare
//!   digit runs are not phone numbers: order ids and amounts look the same.
//! - `pii_iban`: two letters, two check digits and the country's exact length (spaces every
//!   four characters allowed), with a valid ISO 13616 mod-97 checksum.
//! - `pii_card`: 13 to 19 digits (single spaces or dashes between groups allowed) with a
//!   valid Luhn checksum and a known issuer prefix and length.
//! - `pii_ip`: a dotted IPv4 address with four octets of 0 to 255 (not inside a longer dotted
//!   number such as a version string), or an IPv6 address.
//!
//! Numbers that fail their checksum are not hits. Scores say how sure a hit is: checksummed
//! numbers 1.0, e-mail 0.95, phone and IP 0.9 (international, IPv6) or 0.8 (national, IPv4).

pub const SOURCE: &str = "pii";
pub const EMAIL: &str = "pii_email";
pub const PHONE: &str = "pii_phone";
pub const IBAN: &str = "pii_iban";
pub const CARD: &str = "pii_card";
pub const IP: &str = "pii_ip";
pub const CATEGORIES: &[&str] = &[EMAIL, PHONE, IBAN, CARD, IP];

pub const CHECK: super::registry::Check = super::registry::Check {
    name: SOURCE,
    kind: crate::content::ContentKind::Text,
    categories: CATEGORIES,
    languages: None,
    runner: super::registry::Runner::Text {
        score: |input, _, board| {
            for (category, score) in scan(input.raw).by_category() {
                board.add(category, score, SOURCE);
            }
        },
        reads_normalised: false,
    },
};

/// The best score per PII category found in a text.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PiiScores {
    pub email: f64,
    pub phone: f64,
    pub iban: f64,
    pub card: f64,
    pub ip: f64,
}

impl PiiScores {
    pub fn by_category(&self) -> [(&'static str, f64); 5] {
        [
            (EMAIL, self.email),
            (PHONE, self.phone),
            (IBAN, self.iban),
            (CARD, self.card),
            (IP, self.ip),
        ]
    }
}

pub fn scan(text: &str) -> PiiScores {
    let mut scores = PiiScores::default();
    find(text, |hit| {
        let slot = match hit.kind {
            Kind::Email => &mut scores.email,
            Kind::InternationalPhone | Kind::NationalPhone => &mut scores.phone,
            Kind::Iban => &mut scores.iban,
            Kind::Card => &mut scores.card,
            Kind::Ipv4 | Kind::Ipv6 => &mut scores.ip,
        };
        *slot = slot.max(hit.kind.score());
        // A finder's later hits cannot score more than its best kind.
        if *slot >= hit.kind.best_of_finder() {
            Flow::NextKind
        } else {
            Flow::Next
        }
    });
    scores
}

/// What a hit is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Email,
    /// `+` or `00` and a country code.
    InternationalPhone,
    /// A North American number without its country code.
    NationalPhone,
    Iban,
    Card,
    Ipv4,
    Ipv6,
}

impl Kind {
    pub fn category(self) -> &'static str {
        match self {
            Kind::Email => EMAIL,
            Kind::InternationalPhone | Kind::NationalPhone => PHONE,
            Kind::Iban => IBAN,
            Kind::Card => CARD,
            Kind::Ipv4 | Kind::Ipv6 => IP,
        }
    }

    /// The best score the finder of this kind gives (phones: an international number's).
    fn best_of_finder(self) -> f64 {
        match self {
            Kind::NationalPhone => Kind::InternationalPhone.score(),
            other => other.score(),
        }
    }

    /// How sure a hit of this kind is (the module doc).
    pub fn score(self) -> f64 {
        match self {
            Kind::Iban | Kind::Card => 1.0,
            Kind::Email => 0.95,
            Kind::InternationalPhone | Kind::Ipv6 => 0.9,
            Kind::NationalPhone | Kind::Ipv4 => 0.8,
        }
    }
}

/// One piece of personal data in a text: its kind and its byte range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

/// Whether a finder goes on after a hit.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Next,
    /// Stop this finder: go on with the next kind.
    NextKind,
}

/// A scanner of one kind of hit over a text's bytes.
type Finder = fn(&[u8], &mut dyn FnMut(Hit) -> Flow);

/// Every hit in `text`, kind by kind (e-mail, phones, cards, IPv4, IBANs, IPv6), each kind in
/// text order; a kind's finder stops when `visit` says [`Flow::NextKind`].
pub fn find(text: &str, mut visit: impl FnMut(Hit) -> Flow) {
    let bytes = text.as_bytes();
    let digits = bytes.iter().filter(|b| b.is_ascii_digit()).count();
    let mut go = |finder: Finder| finder(bytes, &mut visit);
    if bytes.contains(&b'@') {
        go(find_emails);
    }
    if digits >= 7 {
        go(find_phones);
        go(find_cards);
    }
    if digits >= 4 {
        go(find_ipv4);
    }
    if digits >= 2 {
        go(find_ibans);
    }
    if bytes.contains(&b':') {
        find_ipv6(text, &mut visit);
    }
}

/// Every hit in `text`, in text order.
pub fn find_all(text: &str) -> Vec<Hit> {
    let mut hits = Vec::new();
    find(text, |hit| {
        hits.push(hit);
        Flow::Next
    });
    hits.sort_by_key(|hit| (hit.start, hit.end));
    hits
}

// ---- e-mail ----------------------------------------------------------------------------

fn is_local_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"._%+-".contains(&b)
}

fn find_emails(bytes: &[u8], visit: &mut dyn FnMut(Hit) -> Flow) {
    let mut resume = 0;
    for (at, _) in bytes.iter().enumerate().filter(|(_, &b)| b == b'@') {
        if at < resume {
            continue;
        }
        let mut start = at;
        while start > 0 && is_local_char(bytes[start - 1]) {
            start -= 1;
        }
        while start < at && bytes[start] == b'.' {
            start += 1;
        }
        let local = &bytes[start..at];
        if local.is_empty() || local.len() > 64 || local[local.len() - 1] == b'.' {
            continue;
        }
        if let Some(domain) = domain_len(&bytes[at + 1..]) {
            let end = at + 1 + domain;
            resume = end;
            let hit = Hit {
                kind: Kind::Email,
                start,
                end,
            };
            if visit(hit) == Flow::NextKind {
                return;
            }
        }
    }
}

/// Length of a domain with at least two labels and a TLD of 2+ letters at the start of `rest`.
fn domain_len(rest: &[u8]) -> Option<usize> {
    let mut labels = 0;
    let mut i = 0;
    let mut last_label = (0, 0);
    loop {
        let start = i;
        while i < rest.len() && (rest[i].is_ascii_alphanumeric() || rest[i] == b'-') {
            i += 1;
        }
        if i == start || i - start > 63 || rest[start] == b'-' || rest[i - 1] == b'-' {
            break;
        }
        labels += 1;
        last_label = (start, i);
        if i + 1 < rest.len() && rest[i] == b'.' && rest[i + 1].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        break;
    }
    let tld = &rest[last_label.0..last_label.1];
    (labels >= 2 && tld.len() >= 2 && tld.iter().all(u8::is_ascii_alphabetic))
        .then_some(last_label.1)
}

// ---- digit groups ----------------------------------------------------------------------

/// A run of digits with single separators from `separators` between groups, starting at
/// `start`. Returns the digits and the end of the run.
fn digit_run(bytes: &[u8], start: usize, separators: &[u8], max_digits: usize) -> (Vec<u8>, usize) {
    let mut digits = Vec::new();
    let mut i = start;
    let mut end = start;
    while i < bytes.len() && digits.len() <= max_digits {
        let b = bytes[i];
        if b.is_ascii_digit() {
            digits.push(b - b'0');
            i += 1;
            end = i;
        } else if separators.contains(&b)
            && i + 1 < bytes.len()
            && bytes[i + 1].is_ascii_digit()
            && i > start
        {
            i += 1;
        } else {
            break;
        }
    }
    (digits, end)
}

/// Nothing that makes `at` the middle of a longer token: no letter or digit right before it,
/// and no digit group before it (`3704 0044` is one number, not a number starting at `0044`).
fn boundary_before(bytes: &[u8], at: usize) -> bool {
    if at == 0 {
        return true;
    }
    let previous = bytes[at - 1];
    if previous.is_ascii_alphanumeric() {
        return false;
    }
    let grouped = matches!(previous, b' ' | b'-' | b'.' | b',');
    !(grouped && at >= 2 && bytes[at - 2].is_ascii_digit())
}

fn boundary_after(bytes: &[u8], at: usize) -> bool {
    at >= bytes.len()
        || !(bytes[at].is_ascii_alphanumeric()
            || (bytes[at] == b'.' || bytes[at] == b',')
                && at + 1 < bytes.len()
                && bytes[at + 1].is_ascii_digit())
}

// ---- phone -----------------------------------------------------------------------------

fn find_phones(bytes: &[u8], visit: &mut dyn FnMut(Hit) -> Flow) {
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        // International: "+" or "00", then 8..15 digits.
        let international_start =
            if b == b'+' && i + 1 < bytes.len() && bytes[i + 1].is_ascii_digit() {
                Some(i + 1)
            } else if b == b'0' && bytes.get(i + 1) == Some(&b'0') && boundary_before(bytes, i) {
                Some(i + 2)
            } else {
                None
            };
        if let Some(start) = international_start {
            if start < bytes.len() && bytes[start] != b'0' && boundary_before(bytes, i) {
                let (digits, end) = digit_run_phone(bytes, start);
                if (8..=15).contains(&digits) && boundary_after(bytes, end) {
                    let hit = Hit {
                        kind: Kind::InternationalPhone,
                        start: i,
                        end,
                    };
                    if visit(hit) == Flow::NextKind {
                        return;
                    }
                }
                i = end.max(i + 1);
                continue;
            }
        }
        if boundary_before(bytes, i) {
            if let Some(end) = national(bytes, i) {
                let hit = Hit {
                    kind: Kind::NationalPhone,
                    start: i,
                    end,
                };
                if visit(hit) == Flow::NextKind {
                    return;
                }
                i = end;
                continue;
            }
        }
        i += 1;
    }
}

/// Digits of a phone number: groups separated by one space, dash, dot, or parentheses.
fn digit_run_phone(bytes: &[u8], start: usize) -> (usize, usize) {
    let mut digits = 0;
    let mut i = start;
    let mut end = start;
    while i < bytes.len() && digits <= 16 {
        match bytes[i] {
            b'0'..=b'9' => {
                digits += 1;
                i += 1;
                end = i;
            }
            b' ' | b'-' | b'.' | b'(' | b')' if i + 1 < bytes.len() => {
                let next = bytes[i + 1];
                if next.is_ascii_digit()
                    || (next == b'(' && bytes[i] == b' ')
                    || (bytes[i] == b')' && next == b' ')
                {
                    i += 1;
                } else {
                    break;
                }
            }
            _ => break,
        }
    }
    (digits, end)
}

/// `(555) 123-4567`, `555-123-4567`, `555.123.4567`, `555 123 4567`: 3-3-4 digits with
/// one kind of separator, the area code not starting with 0 or 1. Returns where it ends.
fn national(bytes: &[u8], at: usize) -> Option<usize> {
    let rest = &bytes[at..];
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    let separator = |b: u8| matches!(b, b'-' | b'.' | b' ');
    let (area, end) = if rest.len() >= 14
        && rest[0] == b'('
        && digits(&rest[1..4])
        && rest[4] == b')'
        && rest[5] == b' '
        && digits(&rest[6..9])
        && separator(rest[9])
        && digits(&rest[10..14])
    {
        (rest[1], at + 14)
    } else if rest.len() >= 12
        && digits(&rest[..3])
        && separator(rest[3])
        && digits(&rest[4..7])
        && rest[7] == rest[3]
        && digits(&rest[8..12])
    {
        (rest[0], at + 12)
    } else {
        return None;
    };
    (!matches!(area, b'0' | b'1') && boundary_after(bytes, end)).then_some(end)
}

// ---- IBAN ------------------------------------------------------------------------------

/// ISO 13616 lengths by country (SWIFT IBAN registry).
const IBAN_LENGTHS: &[(&[u8; 2], usize)] = &[
    (b"AD", 24),
    (b"AE", 23),
    (b"AL", 28),
    (b"AT", 20),
    (b"AZ", 28),
    (b"BA", 20),
    (b"BE", 16),
    (b"BG", 22),
    (b"BH", 22),
    (b"BI", 27),
    (b"BR", 29),
    (b"BY", 28),
    (b"CH", 21),
    (b"CR", 22),
    (b"CY", 28),
    (b"CZ", 24),
    (b"DE", 22),
    (b"DJ", 27),
    (b"DK", 18),
    (b"DO", 28),
    (b"EE", 20),
    (b"EG", 29),
    (b"ES", 24),
    (b"FI", 18),
    (b"FK", 18),
    (b"FO", 18),
    (b"FR", 27),
    (b"GB", 22),
    (b"GE", 22),
    (b"GI", 23),
    (b"GL", 18),
    (b"GR", 27),
    (b"GT", 28),
    (b"HR", 21),
    (b"HU", 28),
    (b"IE", 22),
    (b"IL", 23),
    (b"IQ", 23),
    (b"IS", 26),
    (b"IT", 27),
    (b"JO", 30),
    (b"KW", 30),
    (b"KZ", 20),
    (b"LB", 28),
    (b"LC", 32),
    (b"LI", 21),
    (b"LT", 20),
    (b"LU", 20),
    (b"LV", 21),
    (b"LY", 25),
    (b"MC", 27),
    (b"MD", 24),
    (b"ME", 22),
    (b"MK", 19),
    (b"MN", 20),
    (b"MR", 27),
    (b"MT", 31),
    (b"MU", 30),
    (b"NI", 28),
    (b"NL", 18),
    (b"NO", 15),
    (b"OM", 23),
    (b"PK", 24),
    (b"PL", 28),
    (b"PS", 29),
    (b"PT", 25),
    (b"QA", 29),
    (b"RO", 24),
    (b"RS", 22),
    (b"RU", 33),
    (b"SA", 24),
    (b"SC", 31),
    (b"SD", 18),
    (b"SE", 24),
    (b"SI", 19),
    (b"SK", 24),
    (b"SM", 27),
    (b"SO", 23),
    (b"ST", 25),
    (b"SV", 28),
    (b"TL", 23),
    (b"TN", 24),
    (b"TR", 26),
    (b"UA", 29),
    (b"VA", 22),
    (b"VG", 24),
    (b"XK", 20),
    (b"YE", 30),
];

fn iban_length(country: &[u8]) -> Option<usize> {
    IBAN_LENGTHS
        .iter()
        .find(|(code, _)| code.as_slice() == country)
        .map(|&(_, len)| len)
}

fn find_ibans(bytes: &[u8], visit: &mut dyn FnMut(Hit) -> Flow) {
    let mut resume = 0;
    for i in 0..bytes.len().saturating_sub(14) {
        if i < resume {
            continue;
        }
        let country = [
            bytes[i].to_ascii_uppercase(),
            bytes[i + 1].to_ascii_uppercase(),
        ];
        if !country.iter().all(u8::is_ascii_uppercase)
            || !bytes[i + 2].is_ascii_digit()
            || !bytes[i + 3].is_ascii_digit()
            || !boundary_before(bytes, i)
        {
            continue;
        }
        let Some(length) = iban_length(&country) else {
            continue;
        };
        // Collect alphanumerics, allowing single spaces between groups.
        let mut compact = Vec::with_capacity(length);
        let mut j = i;
        while j < bytes.len() && compact.len() < length {
            let b = bytes[j];
            if b.is_ascii_alphanumeric() {
                compact.push(b.to_ascii_uppercase());
                j += 1;
            } else if b == b' '
                && j + 1 < bytes.len()
                && bytes[j + 1].is_ascii_alphanumeric()
                && compact.len() % 4 == 0
            {
                j += 1;
            } else {
                break;
            }
        }
        if compact.len() == length && boundary_after(bytes, j) && iban_checksum_ok(&compact) {
            resume = j;
            let hit = Hit {
                kind: Kind::Iban,
                start: i,
                end: j,
            };
            if visit(hit) == Flow::NextKind {
                return;
            }
        }
    }
}

/// ISO 13616: move the first four characters to the end, letters to 10..35, mod 97 == 1.
pub fn iban_checksum_ok(iban: &[u8]) -> bool {
    let mut remainder: u32 = 0;
    for &b in iban[4..].iter().chain(&iban[..4]) {
        let value = match b {
            b'0'..=b'9' => u32::from(b - b'0'),
            b'A'..=b'Z' => u32::from(b - b'A') + 10,
            _ => return false,
        };
        remainder = if value >= 10 {
            (remainder * 100 + value) % 97
        } else {
            (remainder * 10 + value) % 97
        };
    }
    remainder == 1
}

// ---- cards -----------------------------------------------------------------------------

fn find_cards(bytes: &[u8], visit: &mut dyn FnMut(Hit) -> Flow) {
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() && boundary_before(bytes, i) {
            let (digits, end) = digit_run(bytes, i, b" -", 19);
            if (13..=19).contains(&digits.len())
                && boundary_after(bytes, end)
                && luhn_ok(&digits)
                && issuer_ok(&digits)
            {
                let hit = Hit {
                    kind: Kind::Card,
                    start: i,
                    end,
                };
                if visit(hit) == Flow::NextKind {
                    return;
                }
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
}

pub fn luhn_ok(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 {
                let doubled = d * 2;
                if doubled > 9 {
                    doubled - 9
                } else {
                    doubled
                }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Issuer identification ranges and lengths of the major networks.
pub fn issuer_ok(digits: &[u8]) -> bool {
    let prefix = |n: usize| {
        digits
            .iter()
            .take(n)
            .fold(0u32, |acc, &d| acc * 10 + u32::from(d))
    };
    let len = digits.len();
    let p1 = prefix(1);
    let p2 = prefix(2);
    let p3 = prefix(3);
    let p4 = prefix(4);
    let p6 = prefix(6);
    (p1 == 4 && matches!(len, 13 | 16 | 19))                                   // Visa
        || ((51..=55).contains(&p2) || (2221..=2720).contains(&p4)) && len == 16 // Mastercard
        || matches!(p2, 34 | 37) && len == 15                                  // American Express
        || (p4 == 6011 || p2 == 65 || (644..=649).contains(&p3) || (622126..=622925).contains(&p6))
            && (16..=19).contains(&len)                                        // Discover
        || (3528..=3589).contains(&p4) && (16..=19).contains(&len)             // JCB
        || ((300..=305).contains(&p3) || matches!(p2, 36 | 38 | 39)) && (14..=19).contains(&len) // Diners
        || p2 == 62 && (16..=19).contains(&len)                                // UnionPay
        || (matches!(p2, 50 | 56..=69)) && (12..=19).contains(&len) // Maestro
}

// ---- IP --------------------------------------------------------------------------------

fn find_ipv4(bytes: &[u8], visit: &mut dyn FnMut(Hit) -> Flow) {
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit()
            || !(i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.'))
        {
            i += 1;
            continue;
        }
        let mut octets = 0;
        let mut j = i;
        let mut ok = true;
        while octets < 4 {
            let start = j;
            let mut value: u32 = 0;
            while j < bytes.len() && bytes[j].is_ascii_digit() && j - start < 3 {
                value = value * 10 + u32::from(bytes[j] - b'0');
                j += 1;
            }
            let len = j - start;
            if len == 0 || value > 255 || (len > 1 && bytes[start] == b'0') {
                ok = false;
                break;
            }
            octets += 1;
            if octets < 4 {
                if j < bytes.len() && bytes[j] == b'.' {
                    j += 1;
                } else {
                    ok = false;
                    break;
                }
            }
        }
        let inside_longer = j < bytes.len()
            && (bytes[j].is_ascii_alphanumeric()
                || (bytes[j] == b'.' && bytes.get(j + 1).is_some_and(u8::is_ascii_digit)));
        if ok && !inside_longer {
            let hit = Hit {
                kind: Kind::Ipv4,
                start: i,
                end: j,
            };
            if visit(hit) == Flow::NextKind {
                return;
            }
        }
        // Skip the rest of this dotted number.
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
    }
}

fn find_ipv6(text: &str, visit: &mut dyn FnMut(Hit) -> Flow) {
    let in_candidate = |b: u8| b.is_ascii_hexdigit() || b == b':' || b == b'.';
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !in_candidate(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && in_candidate(bytes[i]) {
            i += 1;
        }
        // ASCII bytes only, so `start..i` are character boundaries.
        let candidate = &text[start..i];
        let colons = candidate.bytes().filter(|&b| b == b':').count();
        if colons < 2 || candidate.len() < 3 {
            continue;
        }
        // `::` alone, or timestamps like 12:30:45, are not addresses.
        let groups = candidate.split(':').filter(|g| !g.is_empty()).count();
        if groups < 3 && !candidate.contains("::") || groups < 2 {
            continue;
        }
        if candidate.parse::<std::net::Ipv6Addr>().is_ok() && !looks_like_time(candidate) {
            let hit = Hit {
                kind: Kind::Ipv6,
                start,
                end: i,
            };
            if visit(hit) == Flow::NextKind {
                return;
            }
        }
    }
}

fn looks_like_time(candidate: &str) -> bool {
    candidate
        .split(':')
        .all(|group| group.len() == 2 && group.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn emails() {
        for text in [
            "write to jane.doe+news@example.co.uk today",
            "a@b.io",
            "(x@mail.example.com)",
        ] {
            assert_eq!(scan(text).email, 0.95, "{text}");
        }
        assert_eq!(scan("see.a@b.com.").email, 0.95);
        for text in [
            "@handle",
            "a@b",
            "user@localhost",
            "x@.com",
            "a@b.c",
            "foo@bar.123",
            "a.@b.com",
        ] {
            assert_eq!(scan(text).email, 0.0, "{text}");
        }
    }

    #[test]
    fn phones() {
        for text in [
            "call +44 20 7946 0958",
            "+1 (555) 123-4567",
            "0033 1 23 45 67 89",
            "tel:+4915112345678",
        ] {
            assert_eq!(scan(text).phone, 0.9, "{text}");
        }
        for text in ["(555) 123-4567 please", "555-123-4567", "555.123.4567"] {
            assert_eq!(scan(text).phone, 0.8, "{text}");
        }
        for text in [
            "order 1234567890",
            "5551234567",
            "+12",
            "2024-11-21",
            "555-12-34567",
            "(155) 123-4567",
            "version 3.1.4.1592",
            "DE89 3704 0044 0532 0130 01",
        ] {
            assert_eq!(scan(text).phone, 0.0, "{text}");
        }
    }

    #[test]
    fn ibans() {
        for text in [
            "DE89 3704 0044 0532 0130 00",
            "pay to GB82WEST12345698765432.",
            "FR14 2004 1010 0505 0001 3M02 606",
            "nl91abna0417164300",
        ] {
            assert_eq!(scan(text).iban, 1.0, "{text}");
        }
        // Wrong checksum, wrong length, unknown country.
        for text in [
            "DE89 3704 0044 0532 0130 01",
            "DE89370400440532013",
            "ZZ89370400440532013000",
        ] {
            assert_eq!(scan(text).iban, 0.0, "{text}");
        }
    }

    #[test]
    fn cards() {
        for text in [
            "4111 1111 1111 1111",
            "card 5555-5555-5555-4444 exp",
            "378282246310005",
            "6011111111111117",
            "3530111333300000",
            "2223003122003222",
        ] {
            assert_eq!(scan(text).card, 1.0, "{text}");
        }
        // Luhn failures, unknown issuers, digits inside longer numbers.
        for text in [
            "4111 1111 1111 1112",
            "1234 5678 9012 3452",
            "94111111111111111",
            "x4111111111111111",
        ] {
            assert_eq!(scan(text).card, 0.0, "{text}");
        }
    }

    #[test]
    fn ips() {
        for text in ["from 192.168.1.20 at", "10.0.0.1", "host=8.8.8.8,"] {
            assert_eq!(scan(text).ip, 0.8, "{text}");
        }
        for text in [
            "version 1.2.3.4.5",
            "256.1.1.1",
            "1.2.3",
            "01.2.3.4",
            "12:30:45",
        ] {
            assert_eq!(scan(text).ip, 0.0, "{text}");
        }
        for text in [
            "2001:db8::1",
            "fe80::1ff:fe23:4567:890a",
            "addr [2001:0db8:85a3:0000:0000:8a2e:0370:7334]",
        ] {
            assert_eq!(scan(text).ip, 0.9, "{text}");
        }
    }

    #[test]
    fn checksums() {
        assert!(luhn_ok(&[4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]));
        assert!(!luhn_ok(&[4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2]));
        assert!(iban_checksum_ok(b"GB82WEST12345698765432"));
        assert!(!iban_checksum_ok(b"GB82WEST12345698765433"));
    }

    #[test]
    fn clean_text_has_no_pii() {
        let text = "Thanks for the update! The meeting moved to 3pm on 2024-11-21, room 204. Price: 1,299.00 EUR.";
        assert_eq!(scan(text), PiiScores::default());
    }

    #[test]
    fn hits_carry_their_byte_ranges() {
        let text = "mail jane@example.com or call +44 20 7946 0958, (555) 123-4567, card \
            4111 1111 1111 1111 from 10.0.0.1 to 2001:db8::1; IBAN DE89 3704 0044 0532 0130 00";
        let found: Vec<(Kind, &str)> = find_all(text)
            .iter()
            .map(|hit| (hit.kind, &text[hit.start..hit.end]))
            .collect();
        assert_eq!(
            found,
            [
                (Kind::Email, "jane@example.com"),
                (Kind::InternationalPhone, "+44 20 7946 0958"),
                (Kind::NationalPhone, "(555) 123-4567"),
                (Kind::Card, "4111 1111 1111 1111"),
                (Kind::Ipv4, "10.0.0.1"),
                (Kind::Ipv6, "2001:db8::1"),
                (Kind::Iban, "DE89 3704 0044 0532 0130 00"),
            ]
        );
        assert_eq!(
            find_all("a@b.io and c@d.io").len(),
            2,
            "every hit, not the first"
        );
        assert!(find_all("nothing here").is_empty());
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,300}") {
            let scores = scan(&text);
            for (_, score) in scores.by_category() {
                prop_assert!((0.0..=1.0).contains(&score));
            }
            for hit in find_all(&text) {
                prop_assert!(hit.start < hit.end && hit.end <= text.len());
                prop_assert!(text.is_char_boundary(hit.start) && text.is_char_boundary(hit.end));
                let counted = scores.by_category().iter().any(|&(category, score)| {
                    category == hit.kind.category() && score >= hit.kind.score()
                });
                prop_assert!(counted);
            }
        }

        #[test]
        fn never_panics_on_digit_soup(text in "[0-9 .:+()@a-fA-F-]{0,120}") {
            let _ = scan(&text);
        }
    }
}
