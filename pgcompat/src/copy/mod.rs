//! `COPY … FROM STDIN` and `COPY … TO STDOUT`: the options of the statement, and PostgreSQL's text and CSV
//! formats read record by record from the bytes a client streams ([`RecordReader`]) and written
//! ([`write_record`]). Pure: the session feeds the bytes and inserts or sends the records.
//!
//! Text format (PostgreSQL's default): one line per row, fields split by the delimiter (tab), `\N` is NULL,
//! backslash escapes (`\t`, `\n`, `\\`, `\b`, `\f`, `\r`, `\v`, octal `\ooo`, hex `\xhh`; any other
//! character after a backslash is itself), and a line `\.` ends the data. CSV: fields split by the
//! delimiter (`,`), quoted with `"` (a quote inside doubled, or preceded by the escape character), quoted
//! fields may hold the delimiter and newlines, an unquoted empty field is NULL (the `NULL` option says
//! otherwise), and `HEADER` skips the first line. Binary (`FORMAT BINARY`): [`binary`].

use sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption};

use crate::error::{PgError, BAD_COPY_FILE_FORMAT, FEATURE_NOT_SUPPORTED, SYNTAX_ERROR};

pub mod binary;

/// Longest record (one row's line) read, in bytes: a bound on what one unterminated line can make the
/// session hold.
pub const RECORD_BYTES_MAX: usize = 64 << 20;
/// Most fields one record may have (PostgreSQL's limit on a table's columns).
pub const FIELDS_MAX: usize = 1600;

/// The data format of a `COPY`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// PostgreSQL's text format.
    Text,
    /// Comma-separated values.
    Csv,
    /// PostgreSQL's binary format ([`binary`]): each field in its type's binary form.
    Binary,
}

/// The options of a `COPY`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The format.
    pub format: Format,
    /// The field delimiter (one ASCII character).
    pub delimiter: u8,
    /// The text that means NULL.
    pub null: String,
    /// CSV: the first line is a header (skipped when reading, written when writing).
    pub header: bool,
    /// CSV: the quote character.
    pub quote: u8,
    /// CSV: the character that escapes a quote inside a quoted field.
    pub escape: u8,
}

impl Options {
    /// The options a `COPY` statement gives (its `WITH (…)` list, or the older unparenthesized ones).
    pub fn from_statement(options: &[CopyOption], legacy: &[CopyLegacyOption]) -> Result<Options, PgError> {
        let mut format = Format::Text;
        let mut delimiter = None;
        let mut null = None;
        let mut header = false;
        let mut quote = None;
        let mut escape = None;
        for option in options {
            match option {
                CopyOption::Format(name) => {
                    format = match name.value.to_ascii_lowercase().as_str() {
                        "text" => Format::Text,
                        "csv" => Format::Csv,
                        "binary" => Format::Binary,
                        other => {
                            return Err(PgError::new(
                                SYNTAX_ERROR,
                                format!("COPY format \"{other}\" not recognized"),
                            ))
                        }
                    }
                }
                CopyOption::Delimiter(c) => delimiter = Some(*c),
                CopyOption::Null(text) => null = Some(text.clone()),
                CopyOption::Header(on) => header = *on,
                CopyOption::Quote(c) => quote = Some(*c),
                CopyOption::Escape(c) => escape = Some(*c),
                CopyOption::Freeze(_) => {}
                CopyOption::Encoding(name) if is_utf8(name) => {}
                other => return Err(PgError::unsupported(format!("the COPY option {other}"))),
            }
        }
        for option in legacy {
            match option {
                CopyLegacyOption::Binary => format = Format::Binary,
                CopyLegacyOption::Delimiter(c) => delimiter = Some(*c),
                CopyLegacyOption::Null(text) => null = Some(text.clone()),
                CopyLegacyOption::Header => header = true,
                CopyLegacyOption::Csv(csv) => {
                    format = Format::Csv;
                    for option in csv {
                        match option {
                            CopyLegacyCsvOption::Header => header = true,
                            CopyLegacyCsvOption::Quote(c) => quote = Some(*c),
                            CopyLegacyCsvOption::Escape(c) => escape = Some(*c),
                            other => return Err(PgError::unsupported(format!("the COPY option {other}"))),
                        }
                    }
                }
                other => return Err(PgError::unsupported(format!("the COPY option {other}"))),
            }
        }
        Options::checked(format, delimiter, null, header, quote, escape)
    }

    fn checked(
        format: Format,
        delimiter: Option<char>,
        null: Option<String>,
        header: bool,
        quote: Option<char>,
        escape: Option<char>,
    ) -> Result<Options, PgError> {
        let single_byte = |c: char, what: &str| -> Result<u8, PgError> {
            u8::try_from(c)
                .ok()
                .filter(|b| b.is_ascii() && *b != b'\r' && *b != b'\n')
                .ok_or_else(|| PgError::unsupported(format!("COPY {what} must be a single one-byte character")))
        };
        if format == Format::Binary {
            let given = [
                ("DELIMITER", delimiter.is_some()),
                ("NULL", null.is_some()),
                ("HEADER", header),
                ("QUOTE", quote.is_some()),
                ("ESCAPE", escape.is_some()),
            ];
            if let Some((option, _)) = given.iter().find(|(_, given)| *given) {
                return Err(PgError::new(
                    SYNTAX_ERROR,
                    format!("cannot specify {option} in BINARY mode"),
                ));
            }
        }
        if format == Format::Text && (quote.is_some() || escape.is_some()) {
            return Err(PgError::unsupported("COPY QUOTE and ESCAPE outside CSV mode"));
        }
        if format == Format::Text && header {
            return Err(PgError::unsupported("COPY HEADER in text format"));
        }
        let delimiter = single_byte(
            delimiter.unwrap_or(if format == Format::Csv { ',' } else { '\t' }),
            "delimiter",
        )?;
        let quote = single_byte(quote.unwrap_or('"'), "quote")?;
        let escape = match escape {
            Some(c) => single_byte(c, "escape")?,
            None => quote,
        };
        if format == Format::Text && (delimiter == b'\\' || delimiter.is_ascii_alphanumeric()) {
            return Err(PgError::unsupported("this COPY delimiter"));
        }
        if format == Format::Csv && delimiter == quote {
            return Err(PgError::unsupported("COPY delimiter and quote must be different"));
        }
        Ok(Options {
            format,
            delimiter,
            null: null.unwrap_or_else(|| {
                if format == Format::Csv {
                    String::new()
                } else {
                    "\\N".to_owned()
                }
            }),
            header,
            quote,
            escape,
        })
    }
}

fn is_utf8(name: &str) -> bool {
    matches!(name.to_ascii_uppercase().as_str(), "UTF8" | "UTF-8" | "UNICODE")
}

/// One record's fields, `None` for NULL.
pub type Record = Vec<Option<String>>;

/// Reads records from the bytes of a `COPY FROM STDIN` as they arrive.
///
/// Linear in what it is given however the bytes are cut: records are taken from a read position (the bytes
/// before it are dropped only once they are half the buffer), and a line still incomplete is scanned on from
/// where the last look stopped, never again from its start. (Dropping each record from the front, and scanning
/// each incomplete line from its start, made a 16 MiB message of short rows, or a long line sent in small
/// pieces, quadratic.)
#[derive(Debug)]
pub struct RecordReader {
    options: Options,
    /// Bytes received; those from `read_at` on are not yet made into records.
    pending: Vec<u8>,
    /// Where the unread bytes of `pending` start.
    read_at: usize,
    /// How far the line starting at `read_at` was scanned without finding its end (`>= read_at`), and whether
    /// that point is inside a CSV quoted field.
    scanned_to: usize,
    scanned_in_quotes: bool,
    /// The header line is still to be skipped.
    skip_header: bool,
    /// The end marker (`\.`) was seen: later bytes are ignored.
    ended: bool,
    /// Line number of the next record, for error messages (1-based, counting the header).
    line: u64,
}

impl RecordReader {
    /// A reader for `options`.
    pub fn new(options: Options) -> RecordReader {
        RecordReader {
            skip_header: options.header,
            options,
            pending: Vec::new(),
            read_at: 0,
            scanned_to: 0,
            scanned_in_quotes: false,
            ended: false,
            line: 1,
        }
    }

    /// The line number of the record [`RecordReader::next_record`] reads next (for error context).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Takes more bytes.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), PgError> {
        if self.ended {
            return Ok(());
        }
        if self.read_at > 0 && self.read_at >= self.pending.len() / 2 {
            // What was read is at least half the buffer: dropping it now costs no more than what it took.
            self.pending.drain(..self.read_at);
            self.scanned_to -= self.read_at;
            self.read_at = 0;
        }
        self.pending.extend_from_slice(bytes);
        if self.pending.len() - self.read_at > RECORD_BYTES_MAX && self.scan_line(false)?.is_none() {
            return Err(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                format!("a COPY line is longer than {RECORD_BYTES_MAX} bytes"),
            ));
        }
        Ok(())
    }

    /// The next complete record, if the bytes so far hold one. With `at_end` (the client said CopyDone), a
    /// last line without its newline counts as complete.
    pub fn next_record(&mut self, at_end: bool) -> Result<Option<Record>, PgError> {
        loop {
            if self.ended {
                return Ok(None);
            }
            let Some((line_len, consumed)) = self.scan_line(at_end)? else {
                return Ok(None);
            };
            let line: Vec<u8> = self.pending[self.read_at..self.read_at + line_len].to_vec();
            self.read_at += consumed;
            self.scanned_to = self.read_at;
            self.scanned_in_quotes = false;
            let line_number = self.line;
            self.line += 1 + line.iter().filter(|b| **b == b'\n').count() as u64;
            let text = String::from_utf8(line).map_err(|_| {
                PgError::new(
                    crate::error::CHARACTER_NOT_IN_REPERTOIRE,
                    format!("invalid byte sequence for encoding \"UTF8\" in COPY line {line_number}"),
                )
            })?;
            if text == "\\." {
                self.ended = true;
                return Ok(None);
            }
            if std::mem::take(&mut self.skip_header) {
                continue;
            }
            let record = match self.options.format {
                Format::Text => parse_text_line(&text, &self.options),
                Format::Csv => parse_csv_record(&text, &self.options),
                // The session reads binary data with `binary::BinaryReader`.
                Format::Binary => Err("binary data read as text".to_owned()),
            }
            .map_err(|message| PgError::new(BAD_COPY_FILE_FORMAT, format!("{message} (COPY line {line_number})")))?;
            if record.len() > FIELDS_MAX {
                return Err(PgError::new(
                    BAD_COPY_FILE_FORMAT,
                    format!("more than {FIELDS_MAX} fields in COPY line {line_number}"),
                ));
            }
            return Ok(Some(record));
        }
    }

    /// The length of the line at `read_at` (without its line ending) and the bytes it takes with its ending, if
    /// it is complete; scans on from where the last look stopped.
    fn scan_line(&mut self, at_end: bool) -> Result<Option<(usize, usize)>, PgError> {
        let bytes = &self.pending;
        let start = self.read_at;
        let mut in_quotes = self.scanned_in_quotes;
        let mut i = self.scanned_to.max(start);
        while i < bytes.len() {
            let b = bytes[i];
            if self.options.format == Format::Csv {
                if in_quotes && b == self.options.escape && self.options.escape != self.options.quote {
                    if i + 1 >= bytes.len() {
                        // The escaped byte has not arrived: look at the escape again next time.
                        break;
                    }
                    i += 2;
                    continue;
                }
                if b == self.options.quote {
                    in_quotes = !in_quotes;
                    i += 1;
                    continue;
                }
            }
            if b == b'\n' && !in_quotes {
                let len = if i > start && bytes[i - 1] == b'\r' { i - 1 } else { i };
                return Ok(Some((len - start, i + 1 - start)));
            }
            i += 1;
        }
        self.scanned_to = i.min(bytes.len());
        self.scanned_in_quotes = in_quotes;
        let unread = &bytes[start..];
        if at_end && !unread.is_empty() {
            if in_quotes {
                return Err(PgError::new(BAD_COPY_FILE_FORMAT, "unterminated CSV quoted field"));
            }
            let len = if unread.ends_with(b"\r") {
                unread.len() - 1
            } else {
                unread.len()
            };
            return Ok(Some((len, unread.len())));
        }
        if unread.len() > RECORD_BYTES_MAX {
            return Err(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                format!("a COPY record is longer than {RECORD_BYTES_MAX} bytes"),
            ));
        }
        Ok(None)
    }
}

/// One line of the text format.
fn parse_text_line(line: &str, options: &Options) -> Result<Record, String> {
    let delimiter = char::from(options.delimiter);
    let mut fields = Vec::new();
    // Split on unescaped delimiters first: the NULL marker is compared with the raw field text.
    let mut raw = String::new();
    let mut chars = line.chars().peekable();
    let mut raws = Vec::new();
    while let Some(c) = chars.next() {
        if c == '\\' {
            raw.push(c);
            if let Some(next) = chars.next() {
                raw.push(next);
            }
        } else if c == delimiter {
            raws.push(std::mem::take(&mut raw));
        } else {
            raw.push(c);
        }
    }
    raws.push(raw);
    for raw in raws {
        if raw == options.null {
            fields.push(None);
        } else {
            fields.push(Some(unescape_text(&raw)?));
        }
    }
    Ok(fields)
}

/// The text format's backslash escapes undone.
fn unescape_text(raw: &str) -> Result<String, String> {
    if !raw.contains('\\') {
        return Ok(raw.to_owned());
    }
    let mut out: Vec<u8> = Vec::with_capacity(raw.len());
    let bytes = raw.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b != b'\\' || i + 1 == bytes.len() {
            out.push(b);
            i += 1;
            continue;
        }
        let next = bytes[i + 1];
        i += 2;
        match next {
            b'b' => out.push(0x08),
            b'f' => out.push(0x0c),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(0x0b),
            b'0'..=b'7' => {
                let mut value = u32::from(next - b'0');
                for _ in 0..2 {
                    match bytes.get(i) {
                        Some(d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push((value & 0xff) as u8);
            }
            b'x' if bytes.get(i).is_some_and(u8::is_ascii_hexdigit) => {
                let mut value = 0u32;
                for _ in 0..2 {
                    match bytes.get(i).and_then(|d| char::from(*d).to_digit(16)) {
                        Some(d) => {
                            value = value * 16 + d;
                            i += 1;
                        }
                        None => break,
                    }
                }
                out.push((value & 0xff) as u8);
            }
            other => out.push(other),
        }
    }
    String::from_utf8(out).map_err(|_| "invalid byte sequence for encoding \"UTF8\"".to_owned())
}

/// One record of CSV (quoted fields may span lines: the reader hands over the whole record).
fn parse_csv_record(record: &str, options: &Options) -> Result<Record, String> {
    let (delimiter, quote, escape) = (options.delimiter, options.quote, options.escape);
    let bytes = record.as_bytes();
    let mut fields = Vec::new();
    let mut field: Vec<u8> = Vec::new();
    let mut quoted_any = false;
    let mut in_quotes = false;
    let mut i = 0;
    loop {
        let at_end = i == bytes.len();
        if at_end || (!in_quotes && bytes[i] == delimiter) {
            if in_quotes {
                return Err("unterminated CSV quoted field".to_owned());
            }
            let text = String::from_utf8(std::mem::take(&mut field))
                .map_err(|_| "invalid byte sequence for encoding \"UTF8\"".to_owned())?;
            let is_null = !quoted_any && text == options.null;
            fields.push(if is_null { None } else { Some(text) });
            quoted_any = false;
            if at_end {
                return Ok(fields);
            }
            i += 1;
            continue;
        }
        let b = bytes[i];
        if in_quotes {
            if b == escape && bytes.get(i + 1) == Some(&quote) {
                field.push(quote);
                i += 2;
            } else if b == quote {
                in_quotes = false;
                i += 1;
            } else {
                field.push(b);
                i += 1;
            }
        } else if b == quote {
            in_quotes = true;
            quoted_any = true;
            i += 1;
        } else {
            field.push(b);
            i += 1;
        }
    }
}

/// One row written in `options`' format, with its line ending.
pub fn write_record(fields: &[Option<String>], options: &Options) -> String {
    let mut line = String::new();
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            line.push(char::from(options.delimiter));
        }
        match (field, options.format) {
            (None, _) => line.push_str(&options.null),
            (Some(text), Format::Text) => escape_text(text, options.delimiter, &mut line),
            (Some(text), Format::Csv) => escape_csv(text, options, &mut line),
            // Binary rows are written with `binary::write_tuple`; text is the closest honest fallback.
            (Some(text), Format::Binary) => escape_text(text, options.delimiter, &mut line),
        }
    }
    line.push('\n');
    line
}

fn escape_text(text: &str, delimiter: u8, out: &mut String) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if c.is_ascii() && c as u8 == delimiter => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
}

fn escape_csv(text: &str, options: &Options, out: &mut String) {
    let (quote, escape, delimiter) = (
        char::from(options.quote),
        char::from(options.escape),
        char::from(options.delimiter),
    );
    let needs_quotes = text.is_empty() && options.null.is_empty()
        || text == options.null
        || text == "\\."
        || text.contains([quote, delimiter, '\n', '\r'])
        || text.starts_with(' ')
        || text.ends_with(' ');
    if !needs_quotes {
        out.push_str(text);
        return;
    }
    out.push(quote);
    for c in text.chars() {
        if c == quote || c == escape {
            out.push(escape);
        }
        out.push(c);
    }
    out.push(quote);
}

/// The header line of a CSV `COPY TO` with `HEADER`.
pub fn header_line(names: &[String], options: &Options) -> String {
    let fields: Vec<Option<String>> = names.iter().cloned().map(Some).collect();
    write_record(&fields, options)
}

/// Refuses a `COPY` to or from a file or program on the server: the data goes through the client.
pub fn refuse_server_side(what: &str) -> PgError {
    PgError::new(
        FEATURE_NOT_SUPPORTED,
        format!("COPY {what} a file or program on the server is not supported; use STDIN/STDOUT (psql's \\copy)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn options(format: Format) -> Options {
        Options::checked(format, None, None, false, None, None).expect("defaults are valid")
    }

    fn read_all(options: Options, chunks: &[&[u8]]) -> Result<Vec<Record>, PgError> {
        let mut reader = RecordReader::new(options);
        let mut records = Vec::new();
        for chunk in chunks {
            reader.push(chunk)?;
            while let Some(record) = reader.next_record(false)? {
                records.push(record);
            }
        }
        while let Some(record) = reader.next_record(true)? {
            records.push(record);
        }
        Ok(records)
    }

    #[test]
    fn text_format_reads_escapes_nulls_and_the_end_marker() -> Result<(), PgError> {
        let records = read_all(
            options(Format::Text),
            &[b"1\ta\\tb\t\\N\n2\t", b"x\\\\y\t\\101\\x41\n\\.\nignored\n"],
        )?;
        assert_eq!(
            records,
            vec![
                vec![Some("1".into()), Some("a\tb".into()), None],
                vec![Some("2".into()), Some("x\\y".into()), Some("AA".into())],
            ]
        );
        Ok(())
    }

    #[test]
    fn csv_reads_quotes_newlines_headers_and_empty_as_null() -> Result<(), PgError> {
        let mut csv = options(Format::Csv);
        csv.header = true;
        let records = read_all(csv, &[b"id,name\r\n1,\"a,\"\"b\"\"\n", b"c\"\n2,,\"\"\n3,x"])?;
        assert_eq!(
            records,
            vec![
                vec![Some("1".into()), Some("a,\"b\"\nc".into())],
                vec![Some("2".into()), None, Some(String::new())],
                vec![Some("3".into()), Some("x".into())],
            ]
        );
        assert!(read_all(options(Format::Csv), &[b"1,\"open"]).is_err());
        Ok(())
    }

    #[test]
    fn invalid_utf8_is_an_error_not_a_panic() {
        assert!(read_all(options(Format::Text), &[b"\xff\xfe\n"]).is_err());
        assert!(read_all(options(Format::Text), &[b"\\xff\n"]).is_err());
    }

    proptest! {
        #[test]
        fn written_records_read_back(rows in proptest::collection::vec(
            proptest::collection::vec(proptest::option::of("[a-z,\"\\\\\t\n\r .N]{0,8}"), 1..4), 1..5),
            csv in any::<bool>(),
        ) {
            let options = options(if csv { Format::Csv } else { Format::Text });
            let width = rows[0].len();
            let rows: Vec<Record> = rows.into_iter().map(|mut r| { r.resize(width, None); r }).collect();
            let text: String = rows.iter().map(|r| write_record(r, &options)).collect();
            let back = read_all(options, &[text.as_bytes()]).expect("reads back");
            prop_assert_eq!(back, rows);
        }

        #[test]
        fn records_read_the_same_however_the_bytes_are_cut(rows in proptest::collection::vec(
            proptest::collection::vec(proptest::option::of("[a-z,\"\\\\\t\n\r .N]{0,8}"), 1..4), 1..12),
            csv in any::<bool>(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let options = options(if csv { Format::Csv } else { Format::Text });
            let width = rows[0].len();
            let rows: Vec<Record> = rows.into_iter().map(|mut r| { r.resize(width, None); r }).collect();
            let text: String = rows.iter().map(|r| write_record(r, &options)).collect();
            let bytes = text.as_bytes();
            let mut at: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
            at.push(0);
            at.push(bytes.len());
            at.sort_unstable();
            let chunks: Vec<&[u8]> = at.windows(2).map(|w| &bytes[w[0]..w[1]]).collect();
            let back = read_all(options, &chunks).expect("reads back");
            prop_assert_eq!(back, rows);
        }
    }

    /// Many short records in one push, and one long record in many small pushes, read whole. (Both are linear
    /// now; a record taken from the front of the buffer each time, or a line scanned from its start at each
    /// push, made them quadratic: this test took minutes then, under a second now.)
    #[test]
    fn large_pushes_and_long_lines_read_in_linear_time() -> Result<(), PgError> {
        let options = options(Format::Text);
        let many: String = (0..200_000).map(|n| format!("{n}\tx\n")).collect();
        let records = read_all(options.clone(), &[many.as_bytes()])?;
        assert_eq!(records.len(), 200_000);
        assert_eq!(records[199_999], vec![Some("199999".to_owned()), Some("x".to_owned())]);
        let long = format!("{}\t1\n", "y".repeat(4 << 20));
        let pieces: Vec<&[u8]> = long.as_bytes().chunks(64).collect();
        let records = read_all(options, &pieces)?;
        assert_eq!(records.len(), 1);
        assert_eq!(records[0][0].as_deref().map(str::len), Some(4 << 20));
        Ok(())
    }
}
