//! Kafka's principals: `User:NAME` (`KafkaPrincipal`), as SASL names them and as Kafka's default principal builder
//! names a TLS client by its certificate's subject.

use std::fmt;

/// Who a connection is: Kafka's `KafkaPrincipal`, type `User`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    name: String,
}

impl Principal {
    /// The principal of an unauthenticated connection (a PLAINTEXT listener, TLS without a client certificate).
    pub fn anonymous() -> Self {
        Principal {
            name: "ANONYMOUS".to_owned(),
        }
    }

    /// `User:name`.
    pub fn user(name: impl Into<String>) -> Self {
        Principal { name: name.into() }
    }

    /// The name after `User:`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Parses Kafka's `TYPE:NAME` form; only the `User` type exists here (as in Kafka's default builder).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.split_once(':') {
            Some(("User", name)) if !name.is_empty() => Ok(Principal::user(name)),
            Some((kind, _)) if kind != "User" => Err(format!(
                "{text:?}: the principal type must be User (Kafka's default principal builder)"
            )),
            _ => Err(format!("{text:?}: expected User:NAME")),
        }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "User:{}", self.name)
    }
}

/// One attribute of a distinguished name, as a certificate holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnValue<'a> {
    /// A string value with the attribute's short name (CN, O, …), for the attributes RFC 2253 names.
    Named(&'static str, &'a str),
    /// Any other attribute: its dotted OID and the DER encoding of its value (written `oid=#hex`).
    Other(String, Vec<u8>),
}

/// The short name RFC 2253 (and Java's `X500Principal.getName()`) gives an attribute OID, if any.
pub fn rfc2253_short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// A subject in RFC 2253 form, as Kafka's default principal builder writes a TLS client's principal
/// (`User:` + `X500Principal.getName()`): relative names from the last to the first, separated by `,`,
/// multi-valued ones joined with `+`, special characters escaped with `\`.
///
/// `rdns` are the certificate's relative distinguished names in their encoded order.
pub fn rfc2253(rdns: &[Vec<DnValue<'_>>]) -> String {
    rdns.iter()
        .rev()
        .map(|rdn| {
            rdn.iter()
                .map(|value| match value {
                    DnValue::Named(name, text) => format!("{name}={}", escape_rfc2253(text)),
                    DnValue::Other(oid, der) => {
                        let hex: String = der.iter().map(|byte| format!("{byte:02x}")).collect();
                        format!("{oid}=#{hex}")
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// RFC 2253 §2.4: `,` `+` `"` `\` `<` `>` `;` escaped anywhere, `#` and a space at the start, a space at the end.
fn escape_rfc2253(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let last = text.chars().count().saturating_sub(1);
    for (index, c) in text.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (index == 0 && (c == '#' || c == ' '))
            || (index == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_is_written_last_name_first_as_java_writes_it() {
        let rdns = vec![
            vec![DnValue::Named("C", "GB")],
            vec![DnValue::Named("O", "Acme, Inc")],
            vec![DnValue::Named("CN", "client-1")],
        ];
        assert_eq!(rfc2253(&rdns), r"CN=client-1,O=Acme\, Inc,C=GB");
    }

    #[test]
    fn attributes_without_a_short_name_are_written_as_oid_and_der() {
        let rdns = vec![vec![
            DnValue::Named("CN", " x "),
            DnValue::Other("1.2.840.113549.1.9.1".to_owned(), vec![0x16, 0x01, 0x61]),
        ]];
        assert_eq!(rfc2253(&rdns), r"CN=\ x\ +1.2.840.113549.1.9.1=#160161");
    }

    #[test]
    fn principals_parse_only_the_user_type() {
        assert_eq!(Principal::parse("User:alice").unwrap().to_string(), "User:alice");
        assert_eq!(Principal::parse("User:CN=a,O=b").unwrap().name(), "CN=a,O=b");
        assert!(Principal::parse("Group:admins").is_err());
        assert!(Principal::parse("alice").is_err());
        assert!(Principal::parse("User:").is_err());
    }
}
