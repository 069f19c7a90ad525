//! Lower-case hex text of bytes (digests, ids), written into one buffer:
//! `hex::encode` collects its string a `char` at a time, about 3k
//! instructions for a SHA-256 digest, and an elicitation operation makes
//! four of them (benches/WHERE_THE_TIME_GOES.md).

/// `bytes` as lower-case hex digits.
pub fn lower(bytes: &[u8]) -> String {
    let mut buf = vec![0u8; bytes.len() * 2];
    // The buffer is exactly twice the input: encoding cannot fail.
    let _ = hex::encode_to_slice(bytes, &mut buf);
    // Hex digits are ASCII.
    String::from_utf8(buf).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn is_hex_encode_byte_for_byte() {
        for bytes in [&b""[..], b"\x00", b"\xff\x10\xab", &[7u8; 32]] {
            assert_eq!(super::lower(bytes), hex::encode(bytes));
        }
    }
}
