//! Local dates (a cancelled job's `CANCELLED AT` line) read `TZ` as
//! glibc reads it, whichever C library sigsleep is built against: a
//! zone's name that also reads as a POSIX rule is the zone's file, and
//! `TZDIR` says where zones are. One test in its own process, since it
//! sets the environment.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

extern "C" {
    fn tzset();
}

/// `TZ` (and `TZDIR`) as a job's environment would give them, read
/// anew: glibc reads them once, unless told.
fn zone(tz: &str, dir: Option<&std::path::Path>) {
    std::env::set_var("TZ", tz);
    if let Some(d) = dir {
        std::env::set_var("TZDIR", d);
    }
    // SAFETY: tzset takes no arguments and only reads TZ.
    unsafe { tzset() };
}

#[test]
fn a_zone_is_read_from_its_file_as_glibc_reads_it() {
    let zones = std::path::Path::new("/usr/share/zoneinfo");
    if !zones.join("PST8PDT").is_file() || !zones.join("Asia/Tokyo").is_file() {
        eprintln!("no zone files here: skipped");
        return;
    }
    // 2025-12-03T12:00:00Z: standard time in California.
    let noon = 1_764_763_200;
    zone("PST8PDT", None);
    assert_eq!(
        sigsleep::supervise::local_date(noon).unwrap(),
        "2025-12-03T04:00:00"
    );
    // As glibc leaves it after: the job's processes get TZ as it was.
    assert_eq!(std::env::var("TZ").unwrap(), "PST8PDT");
    // TZDIR names where the zones are.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(zones.join("Asia/Tokyo"), dir.path().join("Foo")).unwrap();
    zone("Foo", Some(dir.path()));
    assert_eq!(
        sigsleep::supervise::local_date(noon).unwrap(),
        "2025-12-03T21:00:00"
    );
    zone(":Foo", None);
    assert_eq!(
        sigsleep::supervise::local_date(noon).unwrap(),
        "2025-12-03T21:00:00"
    );
}
