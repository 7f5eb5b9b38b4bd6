"""Test certificates, generated at run time (never committed): a CA, a server certificate for `localhost` and
127.0.0.1, and a client certificate (CN=client-1), as PEM files. Used by the secured-listener tests and the TLS
benchmark; needs the `cryptography` package (in the client suite's pinned environment)."""

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject, key, issuer, issuer_key, *, ca=False, sans=()):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path) -> dict:
    """Writes the PEM files into `directory`; returns their paths: ca.pem, server.pem, server.key, client.pem,
    client.key (keys in PKCS#8, unencrypted)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate(_name("mirrorlog test CA"), ca_key, _name("mirrorlog test CA"), ca_key, ca=True)
    paths = {}

    def write(name, data):
        path = directory / name
        path.write_bytes(data)
        paths[name] = str(path)

    write("ca.pem", ca.public_bytes(serialization.Encoding.PEM))
    sans = (x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    for name, subject, extra in [("server", _name("localhost"), sans), ("client", _name("client-1"), ())]:
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = _certificate(subject, key, ca.subject, ca_key, sans=extra)
        write(f"{name}.pem", certificate.public_bytes(serialization.Encoding.PEM))
        write(
            f"{name}.key",
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
        )
    return paths
