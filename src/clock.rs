//! Wall-clock time for everything with a window: key expiry, rotation grace, rate buckets,
//! the monthly quota, request ids and the journal.
//!
//! In production the clock is the system clock. Tests that need to cross a window (a month,
//! a rotation grace, a bucket refill) without waiting use the test-only setting
//! `testing.clock_offset_file`: a file holding a number of milliseconds added to the system
//! clock, read on every call, so a test moves time by rewriting the file. A server started
//! with it logs a warning; it is never set by the shipped configuration.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Clone, Debug, Default)]
pub enum Clock {
    #[default]
    System,
    /// Test only: system time plus the offset (ms) written in this file.
    Offset(PathBuf),
}

impl Clock {
    pub fn now_ms(&self) -> i64 {
        let system = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        match self {
            Clock::System => system,
            Clock::Offset(path) => system + read_offset(path),
        }
    }
}

fn read_offset(path: &std::path::Path) -> i64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

/// `ms` (Unix milliseconds) in RFC 3339, UTC; the number itself if out of range.
pub fn rfc3339(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|time| {
            time.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| ms.to_string())
}

/// Calendar month (UTC) of `unix_ms` as `year * 12 + month0`: what the quota counts in.
pub fn month_of(unix_ms: i64) -> u32 {
    let days = unix_ms.div_euclid(86_400_000);
    let (year, month, _) = civil_from_days(days);
    (year * 12 + i64::from(month) - 1) as u32
}

/// Milliseconds from `unix_ms` to the start of the next calendar month (UTC).
pub fn ms_until_next_month(unix_ms: i64) -> i64 {
    let next = month_of(unix_ms) + 1;
    let (year, month0) = (i64::from(next / 12), i64::from(next % 12));
    days_from_civil(year, month0 as u32 + 1, 1) * 86_400_000 - unix_ms
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days since 1970-01-01 of a Gregorian date (Howard Hinnant's `days_from_civil`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months() {
        // 2026-11-21T12:00:00Z
        let now = days_from_civil(2026, 11, 21) * 86_400_000 + 12 * 3_600_000;
        assert_eq!(month_of(now), 2026 * 12 + 10);
        assert_eq!(ms_until_next_month(now), (9 * 24 + 12) * 3_600_000);
        // December rolls into January.
        let december = days_from_civil(2026, 12, 31) * 86_400_000;
        assert_eq!(
            month_of(december + ms_until_next_month(december)),
            2027 * 12
        );
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }

    #[test]
    fn offsets_move_the_clock() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("offset");
        let clock = Clock::Offset(file.clone());
        let before = Clock::System.now_ms();
        std::fs::write(&file, "86400000").unwrap();
        assert!(clock.now_ms() >= before + 86_400_000);
        std::fs::write(&file, "not a number").unwrap();
        assert!(clock.now_ms() < before + 86_400_000);
    }
}
