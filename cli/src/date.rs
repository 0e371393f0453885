//! Timestamps as the outputs write them: RFC 3339 in UTC, which WARC's `WARC-Date` and the
//! records' `fetched_at` share.

use std::time::{SystemTime, UNIX_EPOCH};

/// `YYYY-MM-DDThh:mm:ssZ` (UTC).
pub fn warc_date(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Year, month, day of a day count since 1970-01-01 (proleptic Gregorian; H. Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `YYYY-MM-DDThh:mm:ss.mmmZ` (UTC): a record's `fetched_at`, fine enough to rebuild rates.
pub fn rfc3339_millis(t: SystemTime) -> String {
    let ms = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_millis());
    let secs = warc_date(t);
    format!("{}.{ms:03}Z", secs.trim_end_matches('Z'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates() {
        assert_eq!(warc_date(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 86_399); // 2000-02-29, last second
        assert_eq!(warc_date(t), "2000-02-29T23:59:59Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(warc_date(t), "2023-11-14T22:13:20Z");
        let t = t + Duration::from_millis(7);
        assert_eq!(rfc3339_millis(t), "2023-11-14T22:13:20.007Z");
    }
}
