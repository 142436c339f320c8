//! Parsing of human-written durations (`30s`, `500ms`, `2m`) and sizes (`64Mi`, `128MiB`, `1G`).

use std::time::Duration;

/// Parses `500ms`, `30s`, `2m`, `1h` and Go's compound form (`5m0s`, `1h30m`); a bare number
/// is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let bad = || format!("`{text}` is not a duration; write e.g. 500ms, 30s, 2m or 1h30m");
    if t.is_empty() {
        return Err(bad());
    }
    let mut rest = t;
    let mut secs = 0.0;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(split);
        let n: f64 = num.parse().map_err(|_| bad())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        secs += match unit {
            "ms" => n / 1000.0,
            "" if t == num => n,
            "s" => n,
            "m" => n * 60.0,
            "h" => n * 3600.0,
            _ => {
                return Err(format!(
                    "`{text}`: unknown unit `{unit}`; use ms, s, m or h"
                ));
            }
        };
        rest = tail;
    }
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("`{text}` must be a positive duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Like [`parse_duration`], but `0` (or `0s`) is allowed: for waits that may be none at all.
pub fn parse_duration_or_zero(text: &str) -> Result<Duration, String> {
    let zero = text
        .trim()
        .trim_end_matches(['s', 'm', 'h'])
        .trim_end_matches('m')
        .parse::<f64>()
        .is_ok_and(|n| n == 0.0);
    if zero {
        return Ok(Duration::ZERO);
    }
    parse_duration(text)
}

/// Parses `67108864`, `64Ki`, `64Mi`, `64MiB`, `1Gi`, `64M` (decimal) into bytes.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("`{text}` is not a size; write e.g. 64Mi or 128MiB"))?;
    let factor: usize = match unit.trim_end_matches('B') {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "K" | "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        _ => return Err(format!("`{text}`: unknown unit `{unit}`; use Ki, Mi or Gi")),
    };
    let bytes = n
        .checked_mul(factor)
        .ok_or_else(|| format!("`{text}` is too large"))?;
    if bytes == 0 {
        return Err(format!("`{text}` must be more than zero"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_a_duration_where_none_is_allowed() {
        for zero in ["0", "0s", "0ms", "0m", " 0h "] {
            assert_eq!(parse_duration_or_zero(zero), Ok(Duration::ZERO), "{zero}");
        }
        assert_eq!(parse_duration_or_zero("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration_or_zero("-1s").is_err());
        assert!(
            parse_duration("0s").is_err(),
            "elsewhere zero stays refused"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("5").unwrap(), Duration::from_secs(5));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("fast").is_err());
        assert_eq!(parse_duration("5m0s").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(
            parse_duration("1m500ms").unwrap(),
            Duration::from_millis(60_500)
        );
        assert!(parse_duration("5m3").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64Mi").unwrap(), 64 << 20);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1_000_000_000);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("64 lots").is_err());
        assert!(parse_size("0").is_err());
    }
}
