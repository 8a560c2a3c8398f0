//! libFuzzer dictionaries as the seed writers of both fuzz crates
//! (`fuzz/`, `gpu_runner/fuzz/`) write them: a `#` header, then one
//! `name="bytes"` line an entry, printable ASCII as it is and every other
//! byte (and `"`, `\`) as `\xNN` (libFuzzer's dictionary syntax, the
//! format of AFL's dictionaries).

/// The dictionary file: `header` (its lines, each starting with `#` and
/// ending with a newline), then every entry in order.
pub fn write(header: &str, entries: &[(String, Vec<u8>)]) -> String {
    let mut out = String::from(header);
    for (name, bytes) in entries {
        out.push_str(name);
        out.push_str("=\"");
        for &b in bytes {
            if b.is_ascii_graphic() && b != b'"' && b != b'\\' {
                out.push(b as char);
            } else {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
        out.push_str("\"\n");
    }
    out
}

/// `s` as an entry name: ASCII letters and digits kept, anything else `_`.
pub fn ident(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_bytes_stay_and_quotes_backslashes_spaces_and_binary_are_escaped() {
        let d = write("# h\n", &[(ident("a-b c"), b"x\"\\ \x00\xff".to_vec())]);
        assert_eq!(d, "# h\na_b_c=\"x\\x22\\x5c\\x20\\x00\\xff\"\n");
    }
}
