//! Users and groups as `/etc/passwd` and `/etc/group` list them, read
//! directly.
//!
//! The commands are linked statically, and glibc's own lookups
//! (`getpwnam`) go through the NSS modules `nsswitch.conf` names: for a
//! name the file does not hold, glibc then loads a module such as
//! systemd's, which a static program cannot do, and crashes. Reading the
//! file is what those lookups do first; a user known only to a network
//! directory is not found (the commands then say the user is invalid, or
//! use `$USER`).

/// One line of the password file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
    pub shell: String,
}

const FILE: &str = "/etc/passwd";
const GROUPS: &str = "/etc/group";

/// The user named `name`.
pub fn by_name(name: &str) -> Option<User> {
    users().find(|u| u.name == name)
}

/// The user of `uid`.
pub fn by_uid(uid: u32) -> Option<User> {
    users().find(|u| u.uid == uid)
}

/// The name of group `gid` (`name:password:gid:members`), the group file
/// read once per command, as the password file is.
pub fn group_name(gid: u32) -> Option<String> {
    static GROUP_NAMES: std::sync::OnceLock<Vec<(u32, String)>> = std::sync::OnceLock::new();
    GROUP_NAMES
        .get_or_init(|| {
            std::fs::read_to_string(GROUPS)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| {
                    let f: Vec<&str> = l.split(':').collect();
                    (f.len() >= 3).then(|| Some((f[2].parse().ok()?, f[0].to_string())))?
                })
                .collect()
        })
        .iter()
        .find(|(g, _)| *g == gid)
        .map(|(_, name)| name.clone())
}

/// The password file's users, read once per command: squeue asks of
/// every job line whose it is.
fn users() -> impl Iterator<Item = User> {
    static USERS: std::sync::OnceLock<Vec<User>> = std::sync::OnceLock::new();
    USERS
        .get_or_init(|| {
            std::fs::read_to_string(FILE)
                .unwrap_or_default()
                .lines()
                .filter_map(parse)
                .collect()
        })
        .iter()
        .cloned()
}

/// `name:password:uid:gid:gecos:home:shell`; `None` for a comment or a
/// line that is not one.
fn parse(line: &str) -> Option<User> {
    let f: Vec<&str> = line.split(':').collect();
    if f.len() < 7 || f[0].is_empty() || f[0].starts_with('#') {
        return None;
    }
    Some(User {
        name: f[0].to_string(),
        uid: f[2].parse().ok()?,
        gid: f[3].parse().ok()?,
        home: f[5].to_string(),
        shell: f[6].to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_the_password_file_read_as_users() {
        assert_eq!(
            parse("ana:x:1000:100:Ana,,,:/home/ana:/bin/bash"),
            Some(User {
                name: "ana".into(),
                uid: 1000,
                gid: 100,
                home: "/home/ana".into(),
                shell: "/bin/bash".into(),
            })
        );
        assert_eq!(parse("# comment"), None);
        assert_eq!(parse("bad:x:notanumber:0:::"), None);
        assert_eq!(parse("short:x:1"), None);
        // The real file has root.
        assert_eq!(by_uid(0).map(|u| u.name), Some("root".to_string()));
        assert_eq!(by_name("no-such-user-of-clemu"), None);
        assert_eq!(group_name(0).as_deref(), Some("root"));
    }
}
