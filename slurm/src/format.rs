//! The format options squeue and sinfo share: `-o` (`%[.][WIDTH]CODE`
//! fields between literal text) and `-O` (`name[:[.][WIDTH][SUFFIX]]`,
//! comma-separated), parsed into the fields each command prints.

/// One field of the output: a code, its width, whether it is
/// right-justified, and the text printed after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub code: char,
    pub width: usize,
    pub right: bool,
    pub suffix: String,
}

/// A `-o` format: the text before the first `%` (printed first on every
/// line), then each `%` starts a field `[.][WIDTH]CODE`, the text up to the
/// next `%` following it (Slurm's `parse_format`: `%%` is no escape).
pub fn percent(fmt: &str) -> (String, Vec<Field>) {
    let mut pieces = fmt.split('%');
    let prefix = pieces.next().unwrap_or("").to_string();
    let fields = pieces
        .filter(|t| !t.is_empty())
        .filter_map(|tok| {
            let (right, rest) = match tok.strip_prefix('.') {
                Some(r) => (true, r),
                None => (false, tok),
            };
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let mut chars = rest[digits..].chars();
            let code = chars.next()?;
            Some(Field {
                code,
                width: rest[..digits].parse().unwrap_or(0),
                right,
                suffix: chars.as_str().to_string(),
            })
        })
        .collect();
    (prefix, fields)
}

/// The code of a `-O` field whose name is not known: Slurm's commands
/// say the name and print the field empty, its width dropped and its
/// suffix kept.
pub const UNKNOWN: char = '\0';

/// A `-O` list, each name turned into its code by `code_of`; 20 wide and
/// left-justified unless a width follows the name. Unknown names are
/// fields of code [`UNKNOWN`], each with Slurm's error line for the
/// command to print (squeue's and sinfo's both say "job").
pub fn named(fmt: &str, code_of: impl Fn(&str) -> Option<char>) -> (Vec<Field>, Vec<String>) {
    let mut fields = Vec::new();
    let mut unknown = Vec::new();
    for tok in fmt.split(',').filter(|t| !t.is_empty()) {
        let (name, spec) = match tok.split_once(':') {
            Some((n, s)) => (n, Some(s)),
            None => (tok, None),
        };
        let (width, right, suffix) = match spec {
            None => (20, false, String::new()),
            Some(s) => {
                let (right, s) = match s.strip_prefix('.') {
                    Some(r) => (true, r),
                    None => (false, s),
                };
                let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
                let width = s[..digits].parse().unwrap_or(0);
                (width, right, s[digits..].to_string())
            }
        };
        let field = match code_of(&name.to_ascii_lowercase()) {
            Some(code) => Field {
                code,
                width,
                right,
                suffix,
            },
            None => {
                unknown.push(format!("Invalid job format specification: {name}"));
                Field {
                    code: UNKNOWN,
                    width: 0,
                    right: false,
                    suffix,
                }
            }
        };
        fields.push(field);
    }
    (fields, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(f: &[Field]) -> Vec<(char, usize, bool, &str)> {
        f.iter()
            .map(|f| (f.code, f.width, f.right, f.suffix.as_str()))
            .collect()
    }

    #[test]
    fn percent_formats_split_into_prefix_fields_and_suffixes() {
        let (p, f) = percent("x%.18i %t|%M");
        assert_eq!(p, "x");
        assert_eq!(
            parts(&f),
            [
                ('i', 18, true, " "),
                ('t', 0, false, "|"),
                ('M', 0, false, "")
            ]
        );
    }

    #[test]
    fn named_formats_default_to_twenty_left_justified() {
        let code = |n: &str| match n {
            "jobid" => Some('A'),
            "state" => Some('T'),
            "name" => Some('j'),
            _ => None,
        };
        let (f, unknown) = named("jobid,state:.5,name:|", code);
        assert_eq!(
            parts(&f),
            [
                ('A', 20, false, ""),
                ('T', 5, true, ""),
                ('j', 0, false, "|")
            ]
        );
        assert!(unknown.is_empty());
        // An unknown name is said, and its field is empty, of no width,
        // its suffix kept.
        let (f, unknown) = named("jobid:|,bogus:7|,name", code);
        assert_eq!(
            parts(&f),
            [
                ('A', 0, false, "|"),
                (UNKNOWN, 0, false, "|"),
                ('j', 20, false, "")
            ]
        );
        assert_eq!(unknown, ["Invalid job format specification: bogus"]);
    }
}
