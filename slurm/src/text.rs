//! How Slurm writes what its commands print: durations, dates, job
//! states, and fields padded or cut to a width. Each function follows one
//! of Slurm's own, named in its comment, so that the output matches
//! byte for byte.

use formats::wire::{JobInfo, JobState};

/// Seconds since the epoch, now.
/// The Slurm release whose commands these are, byte for byte where
/// clemu has the same facts: what `--version` and the JSON outputs say.
pub const RELEASE: &str = "22.05.8";

/// Writes a `--json` document to standard output as Slurm's plugins
/// write theirs: `meta` for `plugin` (`openapi/v0.0.38` or
/// `openapi/dbv0.0.38`), no error, and `items` under `key`, one at a time,
/// so that a document of a hundred thousand jobs is never held whole.
pub fn write_document(
    plugin: &str,
    key: &str,
    items: impl Iterator<Item = serde_json::Value>,
) -> std::io::Result<()> {
    use std::io::Write;
    let name = match plugin {
        "openapi/dbv0.0.38" => "Slurm OpenAPI DB v0.0.38",
        _ => "Slurm OpenAPI v0.0.38",
    };
    let meta = serde_json::json!({"plugin": {"type": plugin, "name": name},
        "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": RELEASE}});
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    write!(out, "{{\"meta\":{meta},\"errors\":[],\"{key}\":[")?;
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut out, &item)?;
    }
    out.write_all(b"]}\n")?;
    out.flush()
}

pub fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A wall-clock instant in ns, in whole seconds (0 stays 0).
pub fn secs(ns: i64) -> i64 {
    ns.div_euclid(1_000_000_000)
}

/// squeue's `_print_secs`: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`.
pub fn short_duration(s: i64) -> String {
    if !(0..=365 * 86400).contains(&s) {
        return "INVALID".into();
    }
    let (d, h, m, sec) = (s / 86400, (s / 3600) % 24, (s / 60) % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{sec:02}")
    } else {
        format!("{m}:{sec:02}")
    }
}

/// Slurm's `secs2time_str` (sacct's Elapsed, scontrol's RunTime):
/// `HH:MM:SS`, `D-HH:MM:SS`.
pub fn long_duration(s: i64) -> String {
    let s = s.max(0);
    let (d, h, m, sec) = (s / 86400, (s / 3600) % 24, (s / 60) % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}:{sec:02}")
    }
}

/// A time limit as squeue prints it (`UNLIMITED`, else as
/// [`short_duration`]).
pub fn squeue_limit(walltime_ns: u64) -> String {
    match walltime_ns {
        0 => "UNLIMITED".into(),
        ns => short_duration(limit_seconds(ns)),
    }
}

/// A time limit as scontrol and sacct print it (`UNLIMITED`, else
/// [`long_duration`]).
pub fn long_limit(walltime_ns: u64) -> String {
    match walltime_ns {
        0 => "UNLIMITED".into(),
        ns => long_duration(limit_seconds(ns)),
    }
}

/// A limit in seconds as shown: whole seconds, rounded up. Slurm keeps
/// limits in whole minutes, and so shows them; clemu keeps one given
/// with seconds (`-t 0:30`) to the second, and shows it as it holds it.
pub fn limit_seconds(walltime_ns: u64) -> i64 {
    walltime_ns.div_ceil(1_000_000_000) as i64
}

/// Slurm keeps time limits in whole minutes, rounded up.
pub fn limit_minutes(walltime_ns: u64) -> i64 {
    (walltime_ns.div_ceil(60_000_000_000)) as i64
}

/// Slurm's `slurm_make_time_str`: local time `s` (seconds) in the form
/// `SLURM_TIME_FORMAT` asks, by default `YYYY-MM-DDTHH:MM:SS`. (The
/// step's own lines, which sigsleep writes, keep the default, as
/// slurmstepd does.)
pub fn date(s: i64) -> String {
    // Into Slurm's buffer of 32 bytes, which cuts a longer date.
    let mut d = date_wide(s);
    if d.len() > 31 {
        let mut cut = 31;
        while !d.is_char_boundary(cut) {
            cut -= 1;
        }
        d.truncate(cut);
    }
    d
}

/// [`date`] uncut, as sacct writes one into a buffer of its field's
/// width (it cuts the date itself).
pub fn date_wide(s: i64) -> String {
    let shown = match time_format() {
        TimeFormat::Standard => None,
        TimeFormat::Relative => strftime(relative_format(s), s),
        TimeFormat::Own(f) => strftime(f, s),
    };
    shown
        .or_else(|| sigsleep::supervise::local_date(s))
        .unwrap_or_else(|| "Unknown".into())
}

/// How dates are written, as `SLURM_TIME_FORMAT` says.
enum TimeFormat {
    /// Unset, empty or `standard`: `%FT%T`.
    Standard,
    /// `relative`: by how far the date is from today ([`relative_format`]).
    Relative,
    /// A format of strftime's.
    Own(std::ffi::CString),
}

/// The command's name, for what it says of its environment.
static COMMAND: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names the running command (`sacct`), once.
pub fn set_command(name: &str) {
    let _ = COMMAND.set(name.to_string());
}

/// `SLURM_TIME_FORMAT`, read once as Slurm reads it: a format without a
/// `%`, or of 32 bytes or more, is said to be invalid (once) and the
/// default is used.
fn time_format() -> &'static TimeFormat {
    static FORMAT: std::sync::OnceLock<TimeFormat> = std::sync::OnceLock::new();
    FORMAT.get_or_init(|| {
        let asked = std::env::var("SLURM_TIME_FORMAT").unwrap_or_default();
        match asked.as_str() {
            "" | "standard" => TimeFormat::Standard,
            "relative" => TimeFormat::Relative,
            f if f.contains('%') && f.len() < 32 => {
                std::ffi::CString::new(f).map_or(TimeFormat::Standard, TimeFormat::Own)
            }
            f => {
                let command = COMMAND.get().map_or("clemu-slurm", String::as_str);
                eprintln!("{command}: error: invalid SLURM_TIME_FORMAT = '{f}'");
                TimeFormat::Standard
            }
        }
    })
}

/// Slurm's format for a date by its distance in days from today (its
/// year's day plus a thousand per year, so that any other year is far):
/// `%H:%M:%S` today, `Ystday %H:%M`, `Tomorr %H:%M`, the weekday within
/// the week ahead, the day and month within the year, else the year.
fn relative_format(s: i64) -> &'static std::ffi::CStr {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    relative_format_at(s, now)
}

/// [`relative_format`] as of `now`.
fn relative_format_at(s: i64, now: i64) -> &'static std::ffi::CStr {
    let day = |tm: &libc::tm| 1000 * (i64::from(tm.tm_year) + 1900) + i64::from(tm.tm_yday);
    match day(&local_tm(s)) - day(&local_tm(now)) {
        -1 => c"Ystday %H:%M",
        0 => c"%H:%M:%S",
        1 => c"Tomorr %H:%M",
        d if !(-365..=365).contains(&d) => c"%-d %b %Y",
        d if !(-1..=6).contains(&d) => c"%-d %b %H:%M",
        _ => c"%a %H:%M",
    }
}

/// Local time `s` written with strftime's `format` (at most 255 bytes, as
/// Slurm's buffers hold less); `None` if it writes nothing.
fn strftime(format: &std::ffi::CStr, s: i64) -> Option<String> {
    let tm = local_tm(s);
    let mut buf = [0u8; 256];
    // SAFETY: strftime writes at most the buffer's length from a valid
    // `tm` and a NUL-terminated format.
    let n = unsafe { libc::strftime(buf.as_mut_ptr().cast(), buf.len(), format.as_ptr(), &tm) };
    (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// A time Slurm's `parse_time` refuses, and where in it: Slurm's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTime {
    pub pos: usize,
    pub text: String,
}

impl std::fmt::Display for BadTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Invalid time specification (pos={}): {}",
            self.pos, self.text
        )
    }
}

impl std::error::Error for BadTime {}

/// A local time as the user writes one for `sacct -S/-E`, as Slurm's
/// `parse_time` reads it looking back: see [`parse_time`].
pub fn parse_date(text: &str) -> Result<i64, BadTime> {
    parse_time(text, true)
}

/// As [`parse_date`], for a time to come (`sbatch --begin`): a time of
/// day without a date that has passed today is tomorrow's, and a day
/// without a year that has passed this year is next year's.
pub fn parse_begin(text: &str) -> Result<i64, BadTime> {
    parse_time(text, false)
}

/// Slurm's `parse_time`: Unix seconds of `text`, local time, made of
/// parts separated by blanks, `-` or `T`, in any order:
///
/// - `HH:MM[:SS]`, with ` AM` or ` PM` if wanted;
/// - `YYYY-MM-DD`, `MMDD[YY]`, `MM/DD[/YY]` or `MM.DD[.YY]`;
/// - the words `today`, `tomorrow`, `midnight`, `noon`, `fika` (15:00)
///   and `teatime` (16:00);
/// - `now[{+|-}COUNT[seconds|minutes|hours|days|weeks]]`;
/// - or the whole of it `utsSECONDS`.
///
/// A date alone is at midnight. A time alone is today's when `past`,
/// else its next one. A date without a year is this year's when `past`
/// (last year's if its month is still to come), else its next one.
/// Nothing at all is 0, as Slurm's. Each part is checked in its range; a
/// day the month has not (February 30th) is refused too, where Slurm
/// would take the day it comes to.
pub fn parse_time(text: &str, past: bool) -> Result<i64, BadTime> {
    let b = text.as_bytes();
    let bad = |pos: usize| BadTime {
        pos,
        text: text.to_string(),
    };
    if b.len() >= 3 && b[..3].eq_ignore_ascii_case(b"uts") {
        return match text[3..].trim_start().parse::<i64>() {
            Ok(n) if n >= 1_000_000 => Ok(n),
            _ => Err(bad(0)),
        };
    }
    let now = now_s();
    let now_tm = local_tm(now);
    let day_of = |tm: &libc::tm| (tm.tm_mon, tm.tm_mday, Some(tm.tm_year));
    let at = |p: usize| b.get(p).copied().unwrap_or(0);
    // (hour, minute, second) and (month from 0, day, year from 1900).
    let mut clock: Option<(i32, i32, i32)> = None;
    let mut day: Option<(i32, i32, Option<i32>)> = None;
    let mut pos = 0;
    while pos < b.len() && b[pos] != b'\n' {
        if matches!(b[pos], b' ' | b'\t' | b'-' | b'T') {
            pos += 1;
            continue;
        }
        let word = |w: &str| {
            b.len() >= pos + w.len() && b[pos..pos + w.len()].eq_ignore_ascii_case(w.as_bytes())
        };
        let hour_word = [("midnight", 0), ("noon", 12), ("fika", 15), ("teatime", 16)]
            .into_iter()
            .find(|(w, _)| word(w));
        if let Some((w, hour)) = hour_word {
            clock = Some((hour, 0, 0));
            pos += w.len();
        } else if word("today") {
            day = Some(day_of(&now_tm));
            pos += 5;
        } else if word("tomorrow") {
            day = Some(day_of(&local_tm(now + 86400)));
            pos += 8;
        } else if word("now") {
            pos += 3;
            while matches!(at(pos), b' ' | b'\t') {
                pos += 1;
            }
            let delta = match at(pos) {
                0 | b'\n' => 0,
                sign @ (b'+' | b'-') => {
                    let d = now_delta(b, &mut pos).ok_or_else(|| bad(pos))?;
                    if sign == b'-' {
                        -d
                    } else {
                        d
                    }
                }
                _ => return Err(bad(pos)),
            };
            let later = now.checked_add(delta).ok_or_else(|| bad(pos))?;
            let tm = local_tm(later);
            day = Some(day_of(&tm));
            clock = Some((tm.tm_hour, tm.tm_min, tm.tm_sec));
        } else if !at(pos).is_ascii_digit() {
            return Err(bad(pos));
        } else if at(pos + 1) == b':' || at(pos + 2) == b':' {
            let start = pos;
            clock = Some(time_of_day(b, &mut pos).ok_or_else(|| bad(start))?);
        } else {
            let start = pos;
            let (month, mday, year) = calendar_day(b, &mut pos).ok_or_else(|| bad(start))?;
            // A day without a year keeps one said before (`today`).
            day = Some((month, mday, year.or(day.and_then(|d| d.2))));
        }
    }
    let (hour, minute, second) = match (clock, day) {
        (None, None) => return Ok(0),
        (None, Some(_)) => (0, 0, 0),
        (Some(c), _) => c,
    };
    let (month, mday, year) = match day {
        Some(d) => d,
        None => {
            let today =
                past || hour > now_tm.tm_hour || (hour == now_tm.tm_hour && minute > now_tm.tm_min);
            day_of(&if today { now_tm } else { local_tm(now + 86400) })
        }
    };
    let this_year = now_tm.tm_year;
    let year = year.unwrap_or(if past {
        if month > now_tm.tm_mon {
            this_year - 1
        } else {
            this_year
        }
    } else if (month, mday, hour, minute)
        > (now_tm.tm_mon, now_tm.tm_mday, now_tm.tm_hour, now_tm.tm_min)
    {
        this_year
    } else {
        this_year + 1
    });
    // SAFETY: an all-zero `tm` is a valid value of the C struct; mktime
    // reads and normalises the `tm` it is given, nothing else.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    (tm.tm_year, tm.tm_mon, tm.tm_mday) = (year, month, mday);
    (tm.tm_hour, tm.tm_min, tm.tm_sec) = (hour, minute, second);
    tm.tm_isdst = -1;
    let s = unsafe { libc::mktime(&mut tm) };
    // A day the month has not (February 30th) came out as another.
    if s == -1 || (tm.tm_mon, tm.tm_mday) != (month, mday) {
        return Err(bad(0));
    }
    Ok(s as i64)
}

/// `now`'s `{+|-}COUNT[UNIT]` from the sign at `*pos`, in seconds; `*pos`
/// ends past it.
fn now_delta(b: &[u8], pos: &mut usize) -> Option<i64> {
    const UNITS: [(&str, i64); 10] = [
        ("seconds", 1),
        ("second", 1),
        ("minutes", 60),
        ("minute", 60),
        ("hours", 3600),
        ("hour", 3600),
        ("days", 86400),
        ("day", 86400),
        ("weeks", 7 * 86400),
        ("week", 7 * 86400),
    ];
    let mut count: i64 = 0;
    let mut digits = 0;
    *pos += 1;
    while *pos < b.len() && b[*pos] != b'\n' {
        let c = b[*pos];
        if c == b' ' || c == b'\t' {
            *pos += 1;
            continue;
        }
        let rest = &b[*pos..];
        let unit = UNITS.iter().find(|(u, _)| {
            rest.len() >= u.len() && rest[..u.len()].eq_ignore_ascii_case(u.as_bytes())
        });
        if let Some((u, times)) = unit {
            *pos += u.len();
            count = count.checked_mul(*times)?;
            break;
        }
        if !c.is_ascii_digit() {
            return None;
        }
        count = count.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
        digits += 1;
        *pos += 1;
    }
    (digits > 0).then_some(count)
}

/// `HH:MM[:SS][ AM| PM]` at `*pos`; `*pos` ends past it.
fn time_of_day(b: &[u8], pos: &mut usize) -> Option<(i32, i32, i32)> {
    let at = |p: usize| b.get(p).copied().unwrap_or(0);
    let digit = |p: usize| at(p).is_ascii_digit().then(|| i32::from(at(p) - b'0'));
    let mut hour = digit(*pos)?;
    *pos += 1;
    if at(*pos) != b':' {
        hour = hour * 10 + digit(*pos)?;
        *pos += 1;
    }
    if hour > 23 || at(*pos) != b':' {
        return None;
    }
    let two = |pos: &mut usize, most: i32| {
        let v = digit(*pos)? * 10 + digit(*pos + 1)?;
        *pos += 2;
        (v <= most).then_some(v)
    };
    *pos += 1;
    let minute = two(pos, 59)?;
    let second = if at(*pos) == b':' {
        *pos += 1;
        two(pos, 59)?
    } else {
        0
    };
    while matches!(at(*pos), b' ' | b'\t') {
        *pos += 1;
    }
    let half = |w: &[u8]| b.len() >= *pos + 2 && b[*pos..*pos + 2].eq_ignore_ascii_case(w);
    if half(b"pm") {
        hour = match hour + 12 {
            24 => 12,
            h if h > 23 => return None,
            h => h,
        };
        *pos += 2;
    } else if half(b"am") {
        hour = match hour {
            12 => 0,
            h if h > 11 => return None,
            h => h,
        };
        *pos += 2;
    }
    Some((hour, minute, second))
}

/// `YYYY-MM-DD`, or `MM[/.]DD[[/.]YY]` at `*pos`: (month from 0, day,
/// year from 1900 if given); `*pos` ends past it. A year `00` is none, as
/// Slurm reads it.
fn calendar_day(b: &[u8], pos: &mut usize) -> Option<(i32, i32, Option<i32>)> {
    let at = |p: usize| b.get(p).copied().unwrap_or(0);
    let digit = |p: usize| at(p).is_ascii_digit().then(|| i32::from(at(p) - b'0'));
    // One or two digits, within 1..=most.
    let small = |pos: &mut usize, most: i32| {
        let mut v = digit(*pos)?;
        *pos += 1;
        if let Some(d) = digit(*pos) {
            v = v * 10 + d;
            *pos += 1;
        }
        (1..=most).contains(&v).then_some(v)
    };
    if at(*pos + 4) == b'-' && at(*pos + 7) == b'-' {
        let mut year = 0;
        for _ in 0..4 {
            year = year * 10 + digit(*pos)?;
            *pos += 1;
        }
        *pos += 1;
        let month = small(pos, 12)?;
        if at(*pos) != b'-' {
            return None;
        }
        *pos += 1;
        let mday = small(pos, 31)?;
        return Some((month - 1, mday, Some(year - 1900)));
    }
    let month = small(pos, 12)?;
    if matches!(at(*pos), b'.' | b'/') {
        *pos += 1;
    }
    let mday = small(pos, 31)?;
    if matches!(at(*pos), b'.' | b'/') {
        *pos += 1;
    }
    let year = match digit(*pos) {
        Some(d) => {
            let y = d * 10 + digit(*pos + 1)?;
            *pos += 2;
            (y != 0).then_some(y + 100)
        }
        None => None,
    };
    Some((month - 1, mday, year))
}

/// Local time `s` much as C's `ctime` writes it, as Slurm's `-l` prints the
/// date above its table: `Sun Nov 29 10:45:15 2026`, `Wed Dec 02 ...`
/// (Slurm's `slurm_ctime2`: the day in two digits, where C's has a
/// blank).
pub fn ctime(s: i64) -> String {
    let t = s as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid value of the C struct;
    // localtime_r writes only the `tm` it is given, and strftime at most
    // the buffer's length, a format without user input.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let mut buf = [0u8; 64];
    let n = unsafe {
        libc::localtime_r(&t, &mut tm);
        libc::strftime(
            buf.as_mut_ptr().cast(),
            buf.len(),
            c"%a %b %d %H:%M:%S %Y".as_ptr(),
            &tm,
        )
    };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Local time `s`, broken down.
fn local_tm(s: i64) -> libc::tm {
    let t = s as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid value of the C struct, and
    // localtime_r only writes the `tm` it is given.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&t, &mut tm) };
    tm
}

/// A duration as sbatch's `--time` takes it: `M`, `M:S`, `H:M:S`, `D-H`,
/// `D-H:M`, `D-H:M:S`, or `UNLIMITED`/`INFINITE`; in seconds (0: none).
pub fn parse_time_limit(text: &str) -> Option<u64> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("infinite") || t == "-1" {
        return Some(0);
    }
    // Each part at most a year's worth: no sum can overflow.
    let num = |s: &str| s.parse::<u64>().ok().filter(|&n| n <= 366 * 86400);
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (num(d)?, Some(r)),
        None => (0, None),
    };
    let secs = match rest {
        Some(r) => {
            let p: Vec<&str> = r.split(':').collect();
            match p.as_slice() {
                [h] => num(h)? * 3600,
                [h, m] => num(h)? * 3600 + num(m)? * 60,
                [h, m, s] => num(h)? * 3600 + num(m)? * 60 + num(s)?,
                _ => return None,
            }
        }
        None => {
            let p: Vec<&str> = t.split(':').collect();
            match p.as_slice() {
                [m] => num(m)? * 60,
                [m, s] => num(m)? * 60 + num(s)?,
                [h, m, s] => num(h)? * 3600 + num(m)? * 60 + num(s)?,
                _ => return None,
            }
        }
    };
    Some(days * 86400 + secs)
}

/// A size in MiB as `--mem` takes it: a number with an optional unit
/// K, M, G or T (M when none).
pub fn parse_mem_mb(text: &str) -> Option<u64> {
    let t = text.trim();
    let (n, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, ""),
    };
    let n: u64 = n.parse().ok()?;
    Some(match unit.to_ascii_uppercase().as_str() {
        "" | "M" | "MB" => n,
        "K" | "KB" => n.div_ceil(1024),
        "G" | "GB" => n.checked_mul(1024)?,
        "T" | "TB" => n.checked_mul(1024 * 1024)?,
        _ => return None,
    })
}

/// Units of [`convert_num_unit`]: none, K, M, G, T, P.
pub const KILO: usize = 1;
pub const MEGA: usize = 2;

/// Slurm's `convert_num_unit` (1024 a step): `num` in unit `orig`, written
/// in the unit `spec` asks (sacct's `--units`), else in the largest unit
/// it divides into without losing precision (a half counts as precise:
/// 1536K is 1.50M), unless `noconvert`. Whole values have no decimals.
pub fn convert_num_unit(num: f64, orig: usize, spec: Option<usize>, noconvert: bool) -> String {
    const UNITS: [&str; 7] = ["", "K", "M", "G", "T", "P", "?"];
    if num as i64 == 0 {
        return "0".into();
    }
    let (mut num, mut unit) = (num, orig);
    match spec {
        Some(want) => {
            while want < unit {
                num *= 1024.0;
                unit -= 1;
            }
            while want > unit {
                num /= 1024.0;
                unit += 1;
            }
        }
        None if noconvert => {}
        None => {
            while num >= 1024.0 && (num as u64).is_multiple_of(512) {
                num /= 1024.0;
                unit += 1;
            }
        }
    }
    let suffix = UNITS[unit.min(6)];
    if num.fract() == 0.0 {
        format!("{}{suffix}", num as u64)
    } else {
        format!("{num:.2}{suffix}")
    }
}

/// A unit as `--units` names it.
pub fn unit_of(c: char) -> Option<usize> {
    match c.to_ascii_uppercase() {
        'K' => Some(1),
        'M' => Some(2),
        'G' => Some(3),
        'T' => Some(4),
        'P' => Some(5),
        _ => None,
    }
}

/// Megabytes as Slurm's commands show memory (`2G`, `1000M`).
pub fn mem_mb(mb: u64) -> String {
    convert_num_unit(mb as f64, MEGA, None, false)
}

/// A job state as Slurm names it in full (squeue's `%T`, sacct's State).
pub fn state_long(s: JobState) -> &'static str {
    match s {
        JobState::Pending => "PENDING",
        JobState::Running => "RUNNING",
        JobState::Suspended => "SUSPENDED",
        JobState::Completed => "COMPLETED",
        JobState::Cancelled => "CANCELLED",
        JobState::Failed => "FAILED",
        JobState::Timeout => "TIMEOUT",
        JobState::NodeFail => "NODE_FAIL",
        JobState::OutOfMemory => "OUT_OF_MEMORY",
        JobState::Preempted => "PREEMPTED",
    }
}

/// Job `j`'s state as squeue and scontrol show it: `COMPLETING` while
/// its processes are being ended.
pub fn shown_long(j: &JobInfo) -> &'static str {
    if j.completing {
        "COMPLETING"
    } else {
        state_long(j.state)
    }
}

/// As [`shown_long`], in squeue's `%t` form.
pub fn shown_compact(j: &JobInfo) -> &'static str {
    if j.completing {
        "CG"
    } else {
        state_compact(j.state)
    }
}

/// Whether job `j` is over as a waiting client sees it (`sbatch --wait`,
/// srun's own allocation): in a final state, with its last process gone.
pub fn over(j: &JobInfo) -> bool {
    !matches!(
        j.state,
        JobState::Pending | JobState::Running | JobState::Suspended
    ) && !j.completing
}

/// Whether a `-t` list names the COMPLETING state (or all states).
pub fn names_completing(list: &str) -> bool {
    list.split(',')
        .any(|w| matches!(w.to_ascii_uppercase().as_str(), "CG" | "COMPLETING" | "ALL"))
}

/// A job state as squeue's `%t` writes it.
pub fn state_compact(s: JobState) -> &'static str {
    match s {
        JobState::Pending => "PD",
        JobState::Running => "R",
        JobState::Suspended => "S",
        JobState::Completed => "CD",
        JobState::Cancelled => "CA",
        JobState::Failed => "F",
        JobState::Timeout => "TO",
        JobState::NodeFail => "NF",
        JobState::OutOfMemory => "OOM",
        JobState::Preempted => "PR",
    }
}

/// The states Slurm's commands list when given one they do not know.
pub const VALID_STATES: &str = "PENDING,RUNNING,SUSPENDED,COMPLETED,CANCELLED,FAILED,TIMEOUT,\
    NODE_FAIL,PREEMPTED,BOOT_FAIL,DEADLINE,OUT_OF_MEMORY,COMPLETING,CONFIGURING,RESIZING,\
    RESV_DEL_HOLD,REQUEUED,REQUEUE_FED,REQUEUE_HOLD,REVOKED,SIGNALING,SPECIAL_EXIT,STAGE_OUT,\
    STOPPED";

/// The state a user names to squeue or scancel (`-t`): compact or long,
/// any case; `all` is every state. The states Slurm has and clemu does
/// not (BOOT_FAIL, DEADLINE, ...) match no job.
pub fn parse_states(list: &str) -> Result<Option<Vec<JobState>>, String> {
    let mut out = Vec::new();
    for word in list.split(',').filter(|w| !w.is_empty()) {
        let w = word.to_ascii_uppercase();
        if w == "ALL" {
            return Ok(None);
        }
        let known = JobState::ALL
            .into_iter()
            .find(|&s| state_long(s) == w || state_compact(s) == w);
        match (known, w.as_str()) {
            (Some(s), _) => out.push(s),
            (
                None,
                "CG" | "COMPLETING" | "BF" | "BOOT_FAIL" | "DL" | "DEADLINE" | "CF" | "CONFIGURING"
                | "RQ" | "REQUEUED" | "RS" | "RESIZING" | "RV" | "REVOKED" | "SE" | "SPECIAL_EXIT"
                | "ST" | "STOPPED" | "RH" | "REQUEUE_HOLD" | "RF" | "REQUEUE_FED" | "RD"
                | "RESV_DEL_HOLD" | "SI" | "SIGNALING" | "SO" | "STAGE_OUT",
            ) => {}
            (None, _) => return Err(format!("Invalid job state specified: {word}")),
        }
    }
    Ok(Some(out))
}

/// The id Slurm shows for a job: `ARRAY_INDEX` for a task of an array.
pub fn job_id(j: &JobInfo) -> String {
    match j.array {
        Some(t) => format!("{}_{}", t.job, t.index),
        None => j.id.to_string(),
    }
}

/// How long a job has run, suspensions left out (squeue's
/// `job_time_used`), in seconds.
pub fn time_used(j: &JobInfo, now: i64) -> i64 {
    if j.start_ns == 0 || j.state == JobState::Pending {
        return 0;
    }
    let end = if j.end_ns > 0 { secs(j.end_ns) } else { now };
    let suspended: i64 = j
        .suspensions
        .iter()
        .map(|&(s, r)| {
            let r = if r > 0 { secs(r) } else { end };
            (r - secs(s)).max(0)
        })
        .sum();
    (end - secs(j.start_ns) - suspended).max(0)
}

/// The nodes a job holds or asks (Slurm's NumNodes).
pub fn node_count(j: &JobInfo) -> usize {
    if j.nodes.is_empty() {
        return 1;
    }
    formats::nodeset::parse(&j.nodes).map_or(1, |s| formats::nodeset::count(&s))
}

/// The reasons a pending job waits out of the queue, named as Slurm
/// names them (the controller uses the same names).
const OUT_OF_QUEUE: [&str; 9] = [
    "Dependency",
    "DependencyNeverSatisfied",
    "BeginTime",
    "JobArrayTaskLimit",
    "PartitionDown",
    "ReqNodeNotAvail",
    "JobHeldUser",
    "JobHeldAdmin",
    REQUEUED_HELD,
];

/// Whether a pending job with reason `r` waits out of the queue: one of
/// [`OUT_OF_QUEUE`], or `ReqNodeNotAvail` with the nodes it names
/// (`ReqNodeNotAvail, UnavailableNodes:node2`).
fn out_of_queue(r: &str) -> bool {
    OUT_OF_QUEUE.contains(&r) || r.starts_with("ReqNodeNotAvail,")
}

/// Whether a job is held (by its user, by the operator, or as it was
/// requeued), whatever its state: Slurm gives it priority 0, and keeps
/// the hold's reason on a job that runs on, or ended, held.
pub fn held(j: &JobInfo) -> bool {
    matches!(
        j.reason.as_str(),
        "JobHeldUser" | "JobHeldAdmin" | REQUEUED_HELD
    )
}

/// What Slurm says of a job `scontrol requeuehold` holds: a user's hold
/// (`JobHeldUser` in its `--json`), described so (squeue's `%r`), and
/// eligible, and accruing, from when its requeue's wait ends.
pub const REQUEUED_HELD: &str = formats::wire::HoldKind::Requeued.reason();

/// Why a pending job waits, as Slurm names it: the controller's reason
/// when it waits out of the queue; else `Resources` for the first job of
/// its partition's queue and `Priority` behind it (what `first` says: see
/// [`first_in_queue`]).
pub fn pending_reason(j: &JobInfo, first: bool) -> String {
    match j.reason.as_str() {
        r if out_of_queue(r) => r.to_string(),
        _ if first => "Resources".into(),
        _ => "Priority".into(),
    }
}

/// The jobs at the head of their partition's queue: per partition, the
/// oldest pending job that waits in the queue rather than out of it.
pub fn first_in_queue<'a>(jobs: impl IntoIterator<Item = &'a JobInfo>) -> Vec<u64> {
    let mut heads: Vec<(&str, u64)> = Vec::new();
    for j in jobs {
        if j.state != JobState::Pending || out_of_queue(&j.reason) {
            continue;
        }
        match heads.iter_mut().find(|(p, _)| *p == j.partition) {
            Some((_, id)) => *id = (*id).min(j.id),
            None => heads.push((&j.partition, j.id)),
        }
    }
    heads.into_iter().map(|(_, id)| id).collect()
}

/// Why a job is where it is, for squeue's `%r`, scontrol's `Reason=`:
/// the pending reason, `NonZeroExitCode` for a failed job (Slurm 22.05's
/// `JobLaunchFailure` when a signal ended it), `TimeLimit` for a
/// timeout, a hold's reason for a job held as it ran, else `None`.
pub fn reason(j: &JobInfo, first_pending: bool) -> String {
    match j.state {
        JobState::Pending => pending_reason(j, first_pending),
        JobState::Failed if j.exit.0 != 0 => "NonZeroExitCode".into(),
        JobState::Failed => "JobLaunchFailure".into(),
        JobState::Timeout => "TimeLimit".into(),
        JobState::NodeFail => "NodeDown".into(),
        JobState::OutOfMemory => "OutOfMemory".into(),
        _ if held(j) => j.reason.clone(),
        _ => "None".into(),
    }
}

/// squeue's and sinfo's `_print_str`: `right` pads on the left; a width
/// cuts what is longer, unless `cut` is false for a right-justified field
/// (a left-justified one is always cut: its format is `%.Ns`); width 0
/// prints the text as it is.
pub fn field(text: &str, width: usize, right: bool, cut: bool) -> String {
    if width == 0 {
        return text.to_string();
    }
    let cut = cut || !right;
    let chars = text.chars().count();
    let shown: String = if cut && chars > width {
        text.chars().take(width).collect()
    } else {
        text.to_string()
    };
    padded(&shown, width, right)
}

/// The widest a field is padded to: a mebibyte of spaces. Slurm's own
/// commands take any width, and crash on one of billions (as a field
/// padded to it would exhaust memory here).
pub const MAX_WIDTH: usize = 1 << 20;

/// `text` padded with spaces to `width` characters (at most
/// [`MAX_WIDTH`]), on the left (`right`: right-justified) or the right.
/// By hand: Rust's `{:>w$}` panics past 65,535.
pub fn padded(text: &str, width: usize, right: bool) -> String {
    let pad = width.min(MAX_WIDTH).saturating_sub(text.chars().count());
    let mut out = String::with_capacity(text.len() + pad);
    if right {
        out.extend(std::iter::repeat_n(' ', pad));
        out.push_str(text);
    } else {
        out.push_str(text);
        out.extend(std::iter::repeat_n(' ', pad));
    }
    out
}

/// The user running the command.
pub fn user_name() -> String {
    crate::users::by_uid(nix::unistd::getuid().as_raw())
        .map(|u| u.name)
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| nix::unistd::getuid().to_string())
}

/// The uid of user `name` (for `UserId=name(uid)`), if the system knows
/// it.
pub fn uid_of(name: &str) -> Option<u32> {
    crate::users::by_name(name).map(|u| u.uid)
}

/// The cores job `j` needs on each of its nodes (Slurm's `MIN_CPUS`,
/// `MinCPUsNode`): a task's, times the tasks it asked on each.
pub fn min_cpus_node(j: &JobInfo) -> u32 {
    j.program
        .as_ref()
        .map_or(1, |p| p.cpus_per_task.max(1) * p.tasks_per_node.max(1))
}

/// What the commands look up of the cluster's nodes, job by job: each
/// node's memory by its name, and each partition's widest node. Made
/// once per command, so that a table or document of every job costs one
/// lookup per job's node rather than a walk of the cluster.
pub struct NodeIndex {
    /// The configuration it was made of: its address and node count.
    of: (usize, usize),
    memory: std::collections::HashMap<String, u64>,
    widest: std::collections::HashMap<String, u32>,
}

impl NodeIndex {
    /// The index of `cfg`: made on the first call, for the one
    /// configuration a command reads; `None` for any other (a caller
    /// then walks the nodes).
    pub fn of(cfg: &controller::config::Cluster) -> Option<&'static NodeIndex> {
        static INDEX: std::sync::OnceLock<NodeIndex> = std::sync::OnceLock::new();
        let key = (cfg as *const _ as usize, cfg.nodes.len());
        let ix = INDEX.get_or_init(|| NodeIndex {
            of: key,
            memory: cfg
                .nodes
                .iter()
                .map(|n| (n.name.clone(), n.memory_mb))
                .collect(),
            widest: cfg
                .partitions
                .iter()
                .map(|p| {
                    let w = p.nodes.iter().map(|&n| cfg.nodes[n].cpus).max();
                    (p.name.clone(), w.unwrap_or(1).max(1))
                })
                .collect(),
        });
        (ix.of == key).then_some(ix)
    }

    /// The most cores one node of partition `name` has.
    pub fn widest(&self, name: &str) -> Option<u32> {
        self.widest.get(name).copied()
    }
}

/// The memory (MiB) of the nodes job `j` holds, or of the nodes it asks
/// for in its partition while it waits: what Slurm counts as asked by a
/// job that asks none (its `DefMemPerNode`, unlimited: whole nodes).
pub fn nodes_memory(j: &JobInfo, cfg: &controller::config::Cluster) -> u64 {
    if let (false, Some(ix)) = (j.nodes.is_empty(), NodeIndex::of(cfg)) {
        return formats::nodeset::parse(&j.nodes)
            .map(|s| {
                formats::nodeset::expand(&s)
                    .iter()
                    .filter_map(|n| ix.memory.get(n))
                    .sum()
            })
            .unwrap_or(0);
    }
    if !j.nodes.is_empty() {
        // One pass over the cluster's nodes, not one per node of the job:
        // a wide job on a large cluster would make that quadratic.
        let names: std::collections::HashSet<String> = formats::nodeset::parse(&j.nodes)
            .map(|s| s.iter().collect())
            .unwrap_or_default();
        return cfg
            .nodes
            .iter()
            .filter(|d| names.contains(&d.name))
            .map(|d| d.memory_mb)
            .sum();
    }
    let first = cfg
        .partitions
        .iter()
        .find(|p| p.name == j.partition)
        .and_then(|p| p.nodes.first())
        .map_or(0, |&n| cfg.nodes[n].memory_mb);
    first
        * j.program
            .as_ref()
            .and_then(|p| p.nodes_asked)
            .map_or(1, |n| u64::from(n.0))
}

/// What job `j` asks, as Slurm's `tres_req_str` (squeue's `tres-alloc`
/// while it waits): its cores, the nodes it holds or, waiting, the fewest
/// it asked (1 unless `-N`), and the memory asked on them (`--mem` per
/// node, `--mem-per-cpu` per core), else theirs.
pub fn tres_req(j: &JobInfo, cfg: &controller::config::Cluster) -> String {
    let p = j.program.as_deref();
    let nodes = match p.and_then(|p| p.nodes_asked) {
        _ if !j.nodes.is_empty() => node_count(j),
        Some((least, _)) => least.max(1) as usize,
        None => 1,
    };
    let mem = match p.map_or(0, |p| p.mem_per_node_mb) {
        0 => mem_asked(j).unwrap_or_else(|| nodes_memory(j, cfg)),
        per_node => per_node * nodes as u64,
    };
    tres(j, nodes, Some(mem), false, mem_mb)
}

/// The memory job `j` asked, in MiB, all told; `None` if none.
pub fn mem_asked(j: &JobInfo) -> Option<u64> {
    (j.mem_per_cpu_mb > 0).then(|| j.mem_per_cpu_mb * u64::from(j.cores))
}

/// Job `j`'s trackable resources on `nodes` nodes with `mem` MiB: in the
/// job's own order (`cpu=4,mem=8G,node=1,billing=4`, as scontrol's `TRES`
/// and squeue's `tres-alloc` give them), or sorted, as Slurm's database
/// gives them to sacct (`billing=4,cpu=4,mem=8G,node=1`), the memory
/// written by `unit` (sacct's `--units`).
pub fn tres(
    j: &JobInfo,
    nodes: usize,
    mem: Option<u64>,
    sorted: bool,
    unit: impl Fn(u64) -> String,
) -> String {
    let cpu = format!("cpu={}", j.cores);
    let mem = mem.map(|mb| format!("mem={}", unit(mb)));
    let node = format!("node={nodes}");
    let billing = format!("billing={}", j.cores);
    let parts = if sorted {
        [Some(billing), Some(cpu), mem, Some(node)]
    } else {
        [Some(cpu), mem, Some(node), Some(billing)]
    };
    parts.into_iter().flatten().collect::<Vec<_>>().join(",")
}

/// The name of user `name`'s group, else the user's name.
pub fn group_of(user: &str) -> String {
    crate::users::by_name(user)
        .and_then(|u| crate::users::group_name(u.gid))
        .unwrap_or_else(|| user.to_string())
}

/// The gid of user `name`'s group, if the system knows the user.
pub fn gid_of(name: &str) -> Option<u32> {
    crate::users::by_name(name).map(|u| u.gid)
}

/// The first node of the node list `nodes` (where a job's batch script
/// runs); empty for none.
pub fn first_node(nodes: &str) -> String {
    nodes
        .split([',', '['])
        .next()
        .map(|n| {
            // The first name only, not the whole list expanded.
            formats::nodeset::parse(nodes)
                .ok()
                .and_then(|s| s.iter().next())
                .unwrap_or_else(|| n.to_string())
        })
        .unwrap_or_default()
}

/// Whose job `j` is: the submitter of a script; for a job that sleeps
/// (submitted by a replay), the user running the command.
pub fn owner(j: &JobInfo, me: &str) -> String {
    match &j.program {
        Some(p) if !p.user.is_empty() => p.user.clone(),
        _ => me.to_string(),
    }
}

/// Whether job `j` is of one of `users` (names or uids, comma-separated).
pub fn owned_by(users: &str, j: &JobInfo, me: &str) -> bool {
    let owner = owner(j, me);
    users.split(',').any(|u| match u.parse::<u32>() {
        Ok(uid) => uid_of(&owner) == Some(uid),
        Err(_) => u == owner,
    })
}

/// A signal as Slurm's commands take it: a number, or a name with or
/// without `SIG`, in any case.
pub fn signal_number(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let upper = s.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    format!("SIG{name}")
        .parse::<nix::sys::signal::Signal>()
        .ok()
        .map(|sig| sig as i32)
}

/// sbatch's `--signal=[{R|B}:]SIG[@SECONDS]` as sigsleep takes it
/// (`B:10@60`: a number, 60 s before the limit unless given), or Slurm's
/// refusal: an unknown signal, or seconds not in 0..=65535. `R:` (the
/// reservation's end) has no meaning without reservations.
pub fn signal_spec(v: &str) -> Result<String, String> {
    let bad = || "Invalid --signal specification".to_string();
    let (flags, rest) = match v.split_once(':') {
        Some((f, r)) if !f.is_empty() && f.chars().all(|c| matches!(c, 'R' | 'B')) => (f, r),
        Some(_) => return Err(bad()),
        None => ("", v),
    };
    let (sig, at) = match rest.split_once('@') {
        Some((s, t)) => (s, t),
        None => (rest, ""),
    };
    let signal = signal_number(sig).ok_or_else(bad)?;
    let seconds: u32 = match at {
        "" => 60,
        t => t.parse().ok().filter(|&s| s <= 65_535).ok_or_else(bad)?,
    };
    let batch = if flags.contains('B') { "B:" } else { "" };
    Ok(format!("{batch}{signal}@{seconds}"))
}

/// `list` cut at its commas outside brackets: `a[1,2],b` is `a[1,2]`
/// and `b`.
pub fn top_level_pieces(list: &str) -> Vec<&str> {
    let (mut pieces, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                pieces.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push(&list[start..]);
    pieces.into_iter().filter(|p| !p.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The standard form, whatever `SLURM_TIME_FORMAT` the one who runs
    /// the tests has set (it shadows [`super::date`]).
    fn date(s: i64) -> String {
        sigsleep::supervise::local_date(s).unwrap()
    }

    #[test]
    fn a_days_date_has_two_digits_as_slurms() {
        // 2026-12-02 12:00 UTC: the 1st, 2nd or 3rd in any time zone.
        let date = ctime(1_796_212_800);
        let day = date.split(' ').nth(2).unwrap_or_default();
        assert!(day.len() == 2 && day.starts_with('0'), "{date}");
    }

    #[test]
    fn the_first_node_is_the_lists_first_name() {
        assert_eq!(first_node("vn[003-005,009]"), "vn003");
        // In the set's order, as the node list is shown.
        assert_eq!(first_node("b2,a1"), "a1");
        assert_eq!(first_node("vn007"), "vn007");
        assert_eq!(first_node(""), "");
        // A list of 80,000 names: its first without the other 79,999.
        assert_eq!(first_node("fn[000000-079999]"), "fn000000");
    }

    #[test]
    fn signals_are_named_as_slurm_names_them() {
        assert_eq!(signal_number("USR1"), Some(libc::SIGUSR1));
        assert_eq!(signal_number("sigterm"), Some(libc::SIGTERM));
        assert_eq!(signal_number("SIGCONT"), Some(libc::SIGCONT));
        assert_eq!(signal_number("10"), Some(10));
        assert_eq!(signal_number("BOGUS"), None);
        assert_eq!(signal_number("0"), None);
        assert_eq!(signal_number("99"), None);
        assert_eq!(signal_spec("B:usr1").unwrap(), "B:10@60");
        assert_eq!(signal_spec("RB:TERM@5").unwrap(), "B:15@5");
        assert!(signal_spec("USR1@-5").is_err());
    }

    #[test]
    fn impossible_dates_and_times_are_refused() {
        for bad in [
            "2026-13-45",
            "2026-02-30",
            "25:99",
            "2026-11-29T99:00",
            "12:60",
            "02/30",
            "1332",
        ] {
            assert!(parse_date(bad).is_err(), "{bad}");
            assert!(parse_begin(bad).is_err(), "{bad}");
        }
        assert!(parse_date("2026-02-28T23:59:59").is_ok());
        assert!(parse_date("2028-02-29").is_ok());
        assert!(parse_date("12/31").is_ok());
    }

    #[test]
    fn fields_pad_to_any_width() {
        assert_eq!(field("12", 5, true, false), "   12");
        assert_eq!(field("12", 5, false, false), "12   ");
        assert_eq!(field("123456", 3, true, true), "123");
        // Past what Rust's own width takes (65,535), as squeue's %70000i.
        let wide = field("7", 70_000, true, false);
        assert_eq!((wide.len(), wide.ends_with(" 7")), (70_000, true));
    }

    #[test]
    fn durations_are_written_as_slurm_writes_them() {
        assert_eq!(short_duration(0), "0:00");
        assert_eq!(short_duration(61), "1:01");
        assert_eq!(short_duration(3600), "1:00:00");
        assert_eq!(short_duration(90061), "1-01:01:01");
        assert_eq!(long_duration(3), "00:00:03");
        assert_eq!(long_duration(90061), "1-01:01:01");
        assert_eq!(squeue_limit(0), "UNLIMITED");
        assert_eq!(squeue_limit(300_000_000_000), "5:00");
        assert_eq!(long_limit(300_000_000_000), "00:05:00");
        // A limit given with seconds shows them (Slurm's are minutes).
        assert_eq!(long_limit(61_000_000_000), "00:01:01");
        assert_eq!(squeue_limit(4_000_000_000), "0:04");
    }

    #[test]
    fn time_limits_parse_in_every_form_sbatch_takes() {
        assert_eq!(parse_time_limit("5"), Some(300));
        assert_eq!(parse_time_limit("5:30"), Some(330));
        assert_eq!(parse_time_limit("1:00:00"), Some(3600));
        assert_eq!(parse_time_limit("2-0"), Some(172_800));
        assert_eq!(parse_time_limit("1-2:3"), Some(86400 + 7200 + 180));
        assert_eq!(parse_time_limit("1-2:3:4"), Some(86400 + 7200 + 184));
        assert_eq!(parse_time_limit("UNLIMITED"), Some(0));
        assert_eq!(parse_time_limit("x"), None);
        assert_eq!(parse_time_limit("1:2:3:4"), None);
        assert_eq!(parse_time_limit("400000000"), None);
        assert_eq!(parse_time_limit("99999999999999999-0"), None);
    }

    #[test]
    fn sizes_convert_as_far_as_they_stay_exact() {
        assert_eq!(mem_mb(100), "100M");
        assert_eq!(mem_mb(2048), "2G");
        assert_eq!(mem_mb(65536), "64G");
        assert_eq!(mem_mb(4000), "4000M");
        assert_eq!(mem_mb(0), "0");
        assert_eq!(convert_num_unit(1536.0, KILO, None, false), "1.50M");
        assert_eq!(convert_num_unit(1620.0, KILO, None, false), "1620K");
        assert_eq!(convert_num_unit(5120.0, KILO, Some(MEGA), false), "5M");
        assert_eq!(convert_num_unit(1620.0, KILO, Some(MEGA), false), "1.58M");
        assert_eq!(convert_num_unit(2048.0, KILO, None, true), "2048K");
    }

    #[test]
    fn memory_sizes_are_mebibytes_unless_they_say() {
        assert_eq!(parse_mem_mb("100"), Some(100));
        assert_eq!(parse_mem_mb("2G"), Some(2048));
        assert_eq!(parse_mem_mb("512K"), Some(1));
        assert_eq!(parse_mem_mb("2X"), None);
    }

    #[test]
    fn fields_pad_and_cut_as_squeue_does() {
        assert_eq!(field("wrap", 8, true, true), "    wrap");
        assert_eq!(field("longname_job_x", 8, true, true), "longname");
        assert_eq!(field("ab", 4, false, true), "ab  ");
        assert_eq!(field("node[1-4]", 3, false, false), "nod");
        assert_eq!(field("node[1-4]", 3, true, false), "node[1-4]");
        assert_eq!(field("x", 0, true, true), "x");
    }

    #[test]
    fn states_parse_in_either_form_and_unknown_ones_are_refused() {
        assert_eq!(
            parse_states("pd,R").unwrap(),
            Some(vec![JobState::Pending, JobState::Running])
        );
        assert_eq!(parse_states("all").unwrap(), None);
        assert_eq!(parse_states("CG").unwrap(), Some(vec![]));
        assert!(parse_states("bogus").is_err());
    }

    #[test]
    fn relative_dates_are_worded_by_their_distance_from_today() {
        // Noon of Wednesday 2 December 2026 (UTC; noon keeps the day in
        // any zone within eleven hours).
        let now = 1_796_212_800 + 12 * 3600;
        let day = 86_400;
        for (offset, want) in [
            (0, "%H:%M:%S"),
            (-day, "Ystday %H:%M"),
            (day, "Tomorr %H:%M"),
            (2 * day, "%a %H:%M"),
            (6 * day, "%a %H:%M"),
            (7 * day, "%-d %b %H:%M"),
            (-2 * day, "%-d %b %H:%M"),
            // Another year is far, however near: Slurm counts a
            // thousand days per year.
            (30 * day, "%-d %b %Y"),
            (-400 * day, "%-d %b %Y"),
        ] {
            let got = relative_format_at(now + offset, now).to_str().unwrap();
            assert_eq!(got, want, "{offset}");
        }
        assert_eq!(
            strftime(c"Tomorr %H:%M", now + day).as_deref(),
            Some(&*format!("Tomorr {}", &date(now + day)[11..16]))
        );
    }

    #[test]
    fn dates_round_trip_through_the_form_sacct_prints() {
        let s = parse_date("2026-03-04T05:06:07").unwrap();
        assert_eq!(date(s), "2026-03-04T05:06:07");
        assert_eq!(
            date(parse_date("2026-03-04").unwrap()),
            "2026-03-04T00:00:00"
        );
        assert!(parse_date("now-1hour").unwrap() < now_s());
        assert!(parse_date("yesterday").is_err());
        let midnight = parse_date("00:00").unwrap();
        assert_eq!(parse_date("today").ok(), Some(midnight));
        assert_eq!(parse_date("tomorrow").ok(), Some(midnight + 86400));
        assert_eq!(parse_date("noon").ok(), Some(midnight + 12 * 3600));
        assert_eq!(parse_date("teatime").ok(), Some(midnight + 16 * 3600));
        assert_eq!(parse_date("fika").ok(), Some(midnight + 15 * 3600));
        // For a time to come, one passed today is tomorrow's.
        assert_eq!(parse_begin("midnight").ok(), Some(midnight + 86400));
        assert_eq!(parse_begin("00:00").ok(), Some(midnight + 86400));
        assert!(parse_begin("23:59:59").unwrap() > now_s() - 1);
        // Month and day, with or without the year.
        assert_eq!(date(parse_date("03/04/26").unwrap()), "2026-03-04T00:00:00");
        assert_eq!(date(parse_date("030426").unwrap()), "2026-03-04T00:00:00");
        assert!(date(parse_date("0304").unwrap()).ends_with("-03-04T00:00:00"));
        assert!(parse_date("13/01").is_err());
        assert!(parse_date("now+9999999999999999999weeks").is_err());
    }

    /// Every form Slurm's parse_time documents, and its message for one
    /// it refuses.
    #[test]
    fn times_read_as_slurms_parse_time_reads_them() {
        let day = |t: &str| date(parse_date(t).unwrap());
        assert_eq!(day("12/01/25-07:30"), "2025-12-01T07:30:00");
        assert_eq!(day("120125-07:30:05"), "2025-12-01T07:30:05");
        assert_eq!(day("12.01.25"), "2025-12-01T00:00:00");
        assert_eq!(day("12.01.25 7:30 PM"), "2025-12-01T19:30:00");
        assert_eq!(day("2025-12-01T12:00am"), "2025-12-01T00:00:00");
        assert_eq!(day("2025-12-01T12:00pm"), "2025-12-01T12:00:00");
        assert_eq!(day("2025-12-01 noon"), "2025-12-01T12:00:00");
        assert_eq!(parse_date("uts1796190000"), Ok(1_796_190_000));
        assert!(parse_date("uts12").is_err());
        assert!(parse_date("13:00pm").is_err());
        // Looking back, a day to come this year is last year's; a time
        // to come, a day to come, is next year's.
        let now = now_s();
        let month_ahead = date(now + 40 * 86400);
        let (mm, dd) = (&month_ahead[5..7], &month_ahead[8..10]);
        let back = parse_date(&format!("{mm}/{dd}")).unwrap();
        let ahead = parse_begin(&format!("{mm}/{dd}")).unwrap();
        assert!(back < now && ahead > now, "{mm}/{dd}: {back} {ahead}");
        assert!(parse_begin("now+1hour").unwrap() >= now + 3600);
        assert!(parse_begin("now + 2 minutes").unwrap() >= now + 120);
        assert!(parse_date("now-1week").unwrap() <= now - 7 * 86400);
        assert!(parse_date("now+5min").is_err());
        assert_eq!(parse_date(""), Ok(0));
        assert_eq!(parse_date("uts 1796190000"), Ok(1_796_190_000));
        let this_year = &date(now)[..4];
        // Ahead, a day without a year that has passed would be next
        // year's; `today` said this year's.
        let passed = date(now - 40 * 86400);
        let (mm, dd) = (&passed[5..7], &passed[8..10]);
        let kept = date(parse_begin(&format!("today {mm}/{dd}")).unwrap());
        assert_eq!(&kept[..10], format!("{this_year}-{mm}-{dd}"));
        assert_eq!(
            parse_date("12/01-25:00").unwrap_err().to_string(),
            "Invalid time specification (pos=6): 12/01-25:00"
        );
    }
}
