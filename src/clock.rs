//! Time stamps as cadre writes them (transcript lines, task and team
//! records): RFC 3339, UTC, milliseconds. The lowest layer: every module
//! may use it, it uses none.

/// The current time as RFC 3339 with milliseconds, UTC.
pub fn now_rfc3339() -> String {
    rfc3339(jiff::Timestamp::now())
}

/// `ts` as `YYYY-MM-DDTHH:MM:SS.mmmZ`, digit by digit (every transcript
/// line has one; formatting machinery cost more than the rest of a line).
pub fn rfc3339(ts: jiff::Timestamp) -> String {
    fn digits(out: &mut String, n: i64, width: u32) {
        for p in (0..width).rev() {
            let d = (n / 10_i64.pow(p)).rem_euclid(10);
            out.push(char::from(b'0' + u8::try_from(d).unwrap_or(0)));
        }
    }
    let t = jiff::tz::Offset::UTC.to_datetime(ts);
    let mut out = String::with_capacity(24);
    for (n, width, after) in [
        (i64::from(t.year()), 4, '-'),
        (i64::from(t.month()), 2, '-'),
        (i64::from(t.day()), 2, 'T'),
        (i64::from(t.hour()), 2, ':'),
        (i64::from(t.minute()), 2, ':'),
        (i64::from(t.second()), 2, '.'),
        (i64::from(t.subsec_nanosecond() / 1_000_000), 3, 'Z'),
    ] {
        digits(&mut out, n, width);
        out.push(after);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_strftime_writes_them() {
        for secs in [
            0,
            951_782_400,
            1_709_251_199,
            1_735_689_599,
            4_102_444_800,
            1_764_150_000,
        ] {
            for nanos in [0, 999_999, 1_000_000, 123_456_789, 999_999_999] {
                let ts = jiff::Timestamp::new(secs, nanos).unwrap();
                let expected = ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string();
                assert_eq!(rfc3339(ts), expected);
            }
        }
    }
}
