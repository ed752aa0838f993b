//! The first messages of a PostgreSQL connection, as the proxy reads them: pure functions over bytes.
//!
//! A connection opens with an untyped message: a 4-byte big-endian length (itself included) and a 4-byte code,
//! then the body. The codes are the protocol version 3.0 (a startup message: `key\0value\0` pairs ending in
//! `\0`), SSLRequest, GSSENCRequest and CancelRequest (a backend process id and secret key). Anything else, a
//! length out of bounds, or a malformed startup body is an error the proxy answers with an ErrorResponse.

use std::collections::HashMap;

/// The protocol version 3.0, as a startup message carries it.
pub const PROTOCOL_3_0: u32 = 196_608;
/// SSLRequest's code.
pub const SSL_REQUEST: u32 = 80_877_103;
/// GSSENCRequest's code.
pub const GSSENC_REQUEST: u32 = 80_877_104;
/// CancelRequest's code.
pub const CANCEL_REQUEST: u32 = 80_877_102;
/// The longest first message accepted (PostgreSQL's own limit is 10 000 bytes).
pub const STARTUP_BYTES_MAX: usize = 10_000;

/// A first message's header: its total length and its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The whole message's length in bytes, the header included (at least 8).
    pub length: usize,
    /// The code after the length.
    pub code: u32,
}

/// What a first message is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirstMessage {
    /// SSLRequest: answer `S` and start TLS, or `N`.
    SslRequest,
    /// GSSENCRequest: answered `N` (no GSSAPI encryption).
    GssEncRequest,
    /// CancelRequest of the session with this backend key.
    Cancel(BackendKey),
    /// A startup message: its parameters, and the bytes to replay to the compute host.
    Startup(Startup),
}

/// The backend key data of a session (BackendKeyData), which a CancelRequest names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BackendKey {
    /// The backend's process id.
    pub process_id: u32,
    /// The secret key.
    pub secret: u32,
}

/// A parsed startup message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Startup {
    /// Its parameters (`user`, `database`, `options`, …).
    pub parameters: HashMap<String, String>,
    /// The whole message as received.
    pub bytes: Vec<u8>,
}

impl Startup {
    /// The database the client asks for (`database`, which defaults to the user name as in PostgreSQL).
    pub fn database(&self) -> Option<&str> {
        self.parameters
            .get("database")
            .or_else(|| self.parameters.get("user"))
            .map(String::as_str)
    }
}

/// Why a first message is refused; each becomes an ErrorResponse with [`StartupError::sqlstate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartupError {
    /// The length is below the header's or above [`STARTUP_BYTES_MAX`].
    #[error("invalid startup packet length {0}")]
    Length(i64),
    /// An unknown protocol version or request code.
    #[error("unsupported frontend protocol {major}.{minor}: the proxy speaks 3.0")]
    Protocol {
        /// The code's high 16 bits.
        major: u32,
        /// The code's low 16 bits.
        minor: u32,
    },
    /// A CancelRequest of the wrong length.
    #[error("invalid cancel request length {0}")]
    CancelLength(usize),
    /// The startup body is not `key\0value\0…\0`.
    #[error("invalid startup packet layout: {0}")]
    Layout(&'static str),
    /// A parameter is not UTF-8.
    #[error("invalid startup packet: a parameter is not UTF-8")]
    Encoding,
    /// No database and no user.
    #[error("no database name in the startup packet")]
    NoDatabase,
}

impl StartupError {
    /// PostgreSQL's SQLSTATE for it: protocol violation.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            StartupError::Protocol { .. } => "0A000",
            StartupError::NoDatabase => "3D000",
            _ => "08P01",
        }
    }
}

/// Reads the header of a first message (its first 8 bytes).
pub fn header(bytes: [u8; 8]) -> Result<Header, StartupError> {
    let [l0, l1, l2, l3, c0, c1, c2, c3] = bytes;
    let length = i32::from_be_bytes([l0, l1, l2, l3]);
    let code = u32::from_be_bytes([c0, c1, c2, c3]);
    let length = usize::try_from(length)
        .ok()
        .filter(|length| (8..=STARTUP_BYTES_MAX).contains(length))
        .ok_or(StartupError::Length(i64::from(length)))?;
    Ok(Header { length, code })
}

/// Parses a whole first message: `head` as [`header`] read it, `body` the `head.length - 8` bytes after it.
pub fn parse(head: Header, body: &[u8]) -> Result<FirstMessage, StartupError> {
    assert_eq!(
        body.len() + 8,
        head.length,
        "the caller reads exactly the body the header announces"
    );
    match head.code {
        SSL_REQUEST if body.is_empty() => Ok(FirstMessage::SslRequest),
        GSSENC_REQUEST if body.is_empty() => Ok(FirstMessage::GssEncRequest),
        SSL_REQUEST | GSSENC_REQUEST => Err(StartupError::Length(i64::try_from(head.length).unwrap_or(i64::MAX))),
        CANCEL_REQUEST => match body {
            [p0, p1, p2, p3, s0, s1, s2, s3] => Ok(FirstMessage::Cancel(BackendKey {
                process_id: u32::from_be_bytes([*p0, *p1, *p2, *p3]),
                secret: u32::from_be_bytes([*s0, *s1, *s2, *s3]),
            })),
            _ => Err(StartupError::CancelLength(head.length)),
        },
        PROTOCOL_3_0 => {
            let parameters = parameters(body)?;
            let mut bytes = Vec::with_capacity(head.length);
            bytes.extend_from_slice(&u32::try_from(head.length).unwrap_or(u32::MAX).to_be_bytes());
            bytes.extend_from_slice(&head.code.to_be_bytes());
            bytes.extend_from_slice(body);
            let startup = Startup { parameters, bytes };
            if startup.database().is_none_or(str::is_empty) {
                return Err(StartupError::NoDatabase);
            }
            Ok(FirstMessage::Startup(startup))
        }
        code => Err(StartupError::Protocol {
            major: code >> 16,
            minor: code & 0xffff,
        }),
    }
}

/// `key\0value\0…\0`: pairs of NUL-terminated strings, then one NUL.
fn parameters(body: &[u8]) -> Result<HashMap<String, String>, StartupError> {
    let Some((&0, pairs)) = body.split_last() else {
        return Err(StartupError::Layout("it does not end with a NUL"));
    };
    let mut parameters = HashMap::new();
    if pairs.is_empty() {
        return Ok(parameters);
    }
    let Some((&0, pairs)) = pairs.split_last() else {
        return Err(StartupError::Layout("a parameter is not NUL-terminated"));
    };
    let strings: Vec<&[u8]> = pairs.split(|byte| *byte == 0).collect();
    if strings.len() % 2 != 0 {
        return Err(StartupError::Layout("a parameter has no value"));
    }
    for pair in strings.chunks_exact(2) {
        let (Ok(key), Ok(value)) = (std::str::from_utf8(pair[0]), std::str::from_utf8(pair[1])) else {
            return Err(StartupError::Encoding);
        };
        if key.is_empty() {
            return Err(StartupError::Layout("a parameter has an empty name"));
        }
        parameters.insert(key.to_owned(), value.to_owned());
    }
    Ok(parameters)
}

/// An ErrorResponse (severity FATAL) with `sqlstate` and `message`.
pub fn error_response(sqlstate: &str, message: &str) -> Vec<u8> {
    let mut fields = Vec::new();
    for (code, value) in [(b'S', "FATAL"), (b'V', "FATAL"), (b'C', sqlstate), (b'M', message)] {
        fields.push(code);
        // A NUL would end the field early: the message is ours, but a database name in it is the client's.
        fields.extend(value.bytes().filter(|byte| *byte != 0));
        fields.push(0);
    }
    fields.push(0);
    let mut message = vec![b'E'];
    message.extend_from_slice(&u32::try_from(fields.len() + 4).unwrap_or(u32::MAX).to_be_bytes());
    message.extend_from_slice(&fields);
    message
}

/// The database a connection name names: the name without a time-travel suffix (`name@LSN`, `name@time`).
pub fn base_name(database: &str) -> &str {
    database.split_once('@').map_or(database, |(name, _)| name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
mod tests {
    use super::*;

    fn message(code: u32, body: &[u8]) -> Result<FirstMessage, StartupError> {
        let length = body.len() + 8;
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&u32::try_from(length).unwrap().to_be_bytes());
        head[4..].copy_from_slice(&code.to_be_bytes());
        parse(header(head)?, body)
    }

    #[test]
    fn a_startup_message_is_parsed_and_kept_whole() {
        let body = b"user\0cambium\0database\0db_1@0/16B3748\0\0";
        let FirstMessage::Startup(startup) = message(PROTOCOL_3_0, body).unwrap() else {
            panic!("not a startup")
        };
        assert_eq!(startup.database(), Some("db_1@0/16B3748"));
        assert_eq!(base_name(startup.database().unwrap()), "db_1");
        assert_eq!(startup.bytes.len(), body.len() + 8);
        assert_eq!(&startup.bytes[8..], body);
    }

    #[test]
    fn the_database_defaults_to_the_user() {
        let FirstMessage::Startup(startup) = message(PROTOCOL_3_0, b"user\0br_x\0\0").unwrap() else {
            panic!("not a startup")
        };
        assert_eq!(startup.database(), Some("br_x"));
    }

    #[test]
    fn requests_are_recognised() {
        assert_eq!(message(SSL_REQUEST, b"").unwrap(), FirstMessage::SslRequest);
        assert_eq!(message(GSSENC_REQUEST, b"").unwrap(), FirstMessage::GssEncRequest);
        assert_eq!(
            message(CANCEL_REQUEST, &[0, 0, 0, 7, 0, 0, 1, 0]).unwrap(),
            FirstMessage::Cancel(BackendKey {
                process_id: 7,
                secret: 256
            })
        );
    }

    #[test]
    fn a_negative_length_is_refused() {
        assert_eq!(
            header([0xff, 0xff, 0xff, 0xff, 0, 3, 0, 0]),
            Err(StartupError::Length(-1))
        );
    }

    #[test]
    fn a_length_below_the_header_is_refused() {
        assert_eq!(header([0, 0, 0, 4, 0, 3, 0, 0]), Err(StartupError::Length(4)));
    }

    #[test]
    fn a_huge_length_is_refused() {
        assert_eq!(header([0, 1, 0, 0, 0, 3, 0, 0]), Err(StartupError::Length(65_536)));
    }

    #[test]
    fn an_unknown_protocol_is_refused() {
        assert_eq!(
            message(0x0002_0000, b"user\0x\0\0"),
            Err(StartupError::Protocol { major: 2, minor: 0 })
        );
        assert_eq!(message(0x0002_0000, b"").unwrap_err().sqlstate(), "0A000");
    }

    #[test]
    fn a_cancel_request_of_the_wrong_length_is_refused() {
        assert_eq!(
            message(CANCEL_REQUEST, &[0, 0, 0, 7]),
            Err(StartupError::CancelLength(12))
        );
    }

    #[test]
    fn an_ssl_request_with_a_body_is_refused() {
        assert_eq!(message(SSL_REQUEST, &[1, 2, 3, 4]), Err(StartupError::Length(12)));
    }

    #[test]
    fn a_body_without_its_final_nul_is_refused() {
        assert!(matches!(
            message(PROTOCOL_3_0, b"user\0x"),
            Err(StartupError::Layout(_))
        ));
    }

    #[test]
    fn a_parameter_without_a_value_is_refused() {
        assert!(matches!(
            message(PROTOCOL_3_0, b"user\0\0"),
            Err(StartupError::Layout(_))
        ));
        assert!(matches!(
            message(PROTOCOL_3_0, b"user\0x\0database\0\0"),
            Err(StartupError::Layout(_))
        ));
    }

    #[test]
    fn an_empty_parameter_name_is_refused() {
        assert!(matches!(
            message(PROTOCOL_3_0, b"\0x\0\0"),
            Err(StartupError::Layout(_))
        ));
    }

    #[test]
    fn a_parameter_that_is_not_utf8_is_refused() {
        assert_eq!(message(PROTOCOL_3_0, b"user\0\xff\0\0"), Err(StartupError::Encoding));
    }

    #[test]
    fn a_startup_without_database_or_user_is_refused() {
        assert_eq!(message(PROTOCOL_3_0, b"\0"), Err(StartupError::NoDatabase));
        assert_eq!(message(PROTOCOL_3_0, b"database\0\0\0"), Err(StartupError::NoDatabase));
    }

    #[test]
    fn an_error_response_is_well_formed() {
        let bytes = error_response("3D000", "database \"a\0b\" does not exist");
        assert_eq!(bytes[0], b'E');
        let length = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
        assert_eq!(length + 1, bytes.len());
        assert!(bytes.ends_with(b"does not exist\0\0"));
        assert_eq!(
            bytes[5..].iter().filter(|b| **b == 0).count(),
            5,
            "the NUL in the name is dropped"
        );
    }
}
