"""Public identifiers that look like secrets, each generated from its format's public specification
(never copied from a list of examples), in the running text and the URLs engineering chat holds them
in. None may be altered by redaction.

- npm integrity (package-lock.json `integrity`, W3C Subresource Integrity): `sha512-` + the standard
  base64 (with `+`, `/` and `=` padding) of the SHA-512 digest of the tarball; older locks `sha1-`.
  CSP source hashes (`'sha256-…'`) are the same SRI form.
- S3 object keys (Amazon S3 "Naming objects"): any UTF-8 up to 1,024 bytes, the safe characters being
  letters, digits and `!-_.*'()`, with `/` as the prefix delimiter; shown after "key", as `Key:` in an
  API response, in `s3://bucket/key` URLs, and with Hive-style `name=value` partitions.
- YouTube playlist ids: the `list=` query parameter of youtube.com/watch and /playlist URLs; a user
  playlist id is `PL` + 32 base64url characters.
- Google Docs, Sheets, Slides and Drive ids: the path segment after `/d/` in
  docs.google.com/{document,spreadsheets,presentation}/d/<id>/edit and drive.google.com/file/d/<id>/view,
  44 base64url characters for a current file.
- IPFS CIDs (multiformats CID spec): CIDv0 is the base58btc of a sha2-256 multihash (0x12 0x20 +
  32 bytes), 46 characters from `Qm`; CIDv1 is multibase `b` (RFC 4648 base32, lower case, no
  padding) of varint version 1, the content codec (dag-pb 0x70, raw 0x55, dag-cbor 0x71) and the
  multihash.
- Bitcoin addresses: BIP-13 / base58check P2PKH (version 0x00, `1…`) and P2SH (0x05, `3…`) of a
  20-byte hash with a 4-byte double-SHA-256 checksum; BIP-173 bech32 segwit v0 (`bc1q…`, 20- or
  32-byte programs) and BIP-350 bech32m v1 taproot (`bc1p…`, 32 bytes).

And look-alikes of our own from the same chats: git SHAs, UUIDs, Docker image digests, Go module
checksums (`h1:` + base64 SHA-256, go.sum), inline PNG data URIs, Nix store paths.
"""

from __future__ import annotations

import base64
import hashlib
import random
import struct
import zlib
from dataclasses import dataclass

from memory.rules.public_ids import bech32_polymod

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

_draws = random.Random(20261207)


@dataclass(frozen=True, slots=True)
class LookAlike:
    kind: str
    value: str  # the identifier that must survive
    text: str  # a sentence or URL it stands in


def _bytes(n: int) -> bytes:
    return bytes(_draws.randrange(256) for _ in range(n))


def _b64url(n: int) -> str:
    return "".join(_draws.choice(_B64URL) for _ in range(n))


# npm / SRI -----------------------------------------------------------------------------------------


def sri(algorithm: str, data: bytes) -> str:
    """The Subresource Integrity string of `data`: `<alg>-<base64 digest>`."""
    return f"{algorithm}-" + base64.b64encode(hashlib.new(algorithm, data).digest()).decode()


def _tarballs() -> list[str]:
    """SHA-512 integrities of made-up tarball bytes, picked so each holds both `/` and `+`."""
    out: list[str] = []
    n = 0
    while len(out) < 4:
        value = sri("sha512", f"package/index.js {n}\nmodule.exports = {n};\n".encode())
        n += 1
        if "/" in value and "+" in value:
            out.append(value)
    return out


# Bitcoin -------------------------------------------------------------------------------------------


def b58encode(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    out = ""
    while number:
        number, digit = divmod(number, 58)
        out = _B58[digit] + out
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + out


def base58check(version: bytes, payload: bytes) -> str:
    data = version + payload
    return b58encode(data + hashlib.sha256(hashlib.sha256(data).digest()).digest()[:4])


def hash160(data: bytes) -> bytes:
    return hashlib.new("ripemd160", hashlib.sha256(data).digest()).digest()


def convertbits(data: bytes, to: int) -> list[int]:
    acc = bits = 0
    out: list[int] = []
    for byte in data:
        acc = acc << 8 | byte
        bits += 8
        while bits >= to:
            bits -= to
            out.append(acc >> bits & (1 << to) - 1)
    if bits:
        out.append(acc << (to - bits) & (1 << to) - 1)
    return out


def bech32(hrp: str, data: list[int], constant: int = 1) -> str:
    """BIP-173 bech32 (constant 1) or BIP-350 bech32m (0x2BC830A3) of 5-bit groups."""
    expanded = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    check = bech32_polymod([*expanded, *data, 0, 0, 0, 0, 0, 0]) ^ constant
    checksum = [check >> 5 * (5 - i) & 31 for i in range(6)]
    return hrp + "1" + "".join(_BECH32[d] for d in data + checksum)


def segwit_address(hrp: str, version: int, program: bytes) -> str:
    """BIP-173 (version 0, bech32) / BIP-350 (version ≥ 1, bech32m) address."""
    return bech32(hrp, [version, *convertbits(program, 5)], 1 if version == 0 else 0x2BC830A3)


# IPFS ----------------------------------------------------------------------------------------------


def cid_v0(data: bytes) -> str:
    return b58encode(b"\x12\x20" + hashlib.sha256(data).digest())


def cid_v1(codec: int, data: bytes) -> str:
    raw = bytes([0x01, codec, 0x12, 0x20]) + hashlib.sha256(data).digest()
    return "b" + base64.b32encode(raw).decode().rstrip("=").lower()


# Others --------------------------------------------------------------------------------------------


def _png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\0" + _bytes(width * 3) for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _nix_hash() -> str:
    return "".join(_draws.choice("0123456789abcdfghijklmnpqrsvwxyz") for _ in range(32))


def _build() -> tuple[LookAlike, ...]:
    cases: list[LookAlike] = []

    def add(kind: str, value: str, *texts: str) -> None:
        cases.extend(LookAlike(kind, value, text) for text in texts)

    # npm integrity and other SRI strings
    names = ("left-pad", "@babel/core", "typescript", "react-dom")
    for name, integrity in zip(names, _tarballs(), strict=True):
        add(
            "npm integrity",
            integrity,
            f'"integrity": "{integrity}",',
            f"the lockfile says {name} has integrity {integrity} but the registry disagrees",
            f"npm ERR! EINTEGRITY {integrity} integrity checksum failed",
        )
    old = sri("sha1", b"package/package.json")
    add("npm integrity", old, f'"integrity": "{old}",')
    script = sri("sha384", b"console.log('hello');")
    add("sri", script, f'<script src="/app.js" integrity="{script}" crossorigin="anonymous"></script>')
    csp = sri("sha256", b"alert('inline');")
    add("csp hash", csp, f"Content-Security-Policy: script-src 'self' '{csp}'")

    # S3 object keys
    for key in (
        "reports/2026/q3/summary.csv",
        "exports/customers/2026-12-07/batch-0007.parquet",
        "raw/events/year=2026/month=12/day=07/part-00000-3f2a9c1d-8e7b-4a5f-9e3d-2c1b0a9f8e7d-c000.snappy.parquet",
        "AWSLogs/123456789012/CloudTrail/us-east-1/2026/12/07/123456789012_CloudTrail_us-east-1_20261207T1205Z_Q8mWtY2r.json.gz",
        "backups/pg/prod-db-1/base/000000010000000A000000FE",
        "static/js/main.8f3a2c1d.chunk.js",
        "uploads/avatars/UserProfile/Photo_2026_Final.png",
    ):
        add(
            "s3 object key",
            key,
            f"the object key {key} is missing",
            f"key {key}",
            f"Key: {key}",
            f'"Key": "{key}",',
            f"aws s3api head-object --bucket acme-data --key {key}",
            f"s3://acme-data/{key}",
            f"s3://acme-data/key/{key}",
        )

    # YouTube playlists
    for _ in range(4):
        playlist = "PL" + _b64url(32)
        video = _b64url(11)
        add(
            "youtube playlist id",
            playlist,
            f"https://www.youtube.com/playlist?list={playlist}",
            f"https://www.youtube.com/watch?v={video}&list={playlist}&index=3",
            f"the onboarding playlist is {playlist}",
            f"add it to playlist {playlist}.",
        )

    # Google Docs, Sheets, Slides, Drive
    for product, tail in (
        ("docs.google.com/document", "edit"),
        ("docs.google.com/spreadsheets", "edit#gid=0"),
        ("docs.google.com/presentation", "edit?usp=sharing"),
        ("drive.google.com/file", "view"),
    ):
        doc = "1" + _b64url(43)
        add(
            "google doc id",
            doc,
            f"https://{product}/d/{doc}/{tail}",
            f"the design doc is at https://{product}/d/{doc}/{tail} (comment there)",
            f"<https://{product}/d/{doc}/{tail}|RFC: memory scopes>",
            f"the file id is {doc}",
        )

    # IPFS
    for n in range(3):
        content = f"<html><body>release notes {n}</body></html>".encode()
        v0 = cid_v0(content)
        add("ipfs cid v0", v0, f"pinned as {v0}", f"ipfs://{v0}", f"https://ipfs.io/ipfs/{v0}/index.html")
        for codec in (0x70, 0x55, 0x71):
            v1 = cid_v1(codec, content + bytes([codec]))
            add("ipfs cid v1", v1, f"pinned as {v1}", f"ipfs://{v1}", f"https://{v1}.ipfs.dweb.link/")

    # Bitcoin
    for n in range(3):
        pubkey = b"\x02" + hashlib.sha256(f"pubkey {n}".encode()).digest()
        p2pkh = base58check(b"\x00", hash160(pubkey))
        p2sh = base58check(b"\x05", hash160(b"\x51" + pubkey))
        v0 = segwit_address("bc", 0, hash160(pubkey))
        v0_script = segwit_address("bc", 0, hashlib.sha256(b"\x51" + pubkey).digest())
        taproot = segwit_address("bc", 1, hashlib.sha256(pubkey).digest())
        for value in (p2pkh, p2sh, v0, v0_script, taproot):
            add(
                "bitcoin address",
                value,
                f"send the refund to {value} please",
                f"bitcoin:{value}?amount=0.001",
                f"https://mempool.space/address/{value}",
            )

    # Look-alikes of our own
    sha = hashlib.sha1(b"commit tree").hexdigest()
    add("git sha", sha, f"git revert {sha}", f"https://github.com/acme/app/commit/{sha}")
    uuid = "3f2a9c1d-8e7b-4a5f-9e3d-2c1b0a9f8e7d"
    add("uuid", uuid, f"https://app.example.com/runs/{uuid}/logs")
    digest = "sha256:" + hashlib.sha256(b"image manifest").hexdigest()
    add("docker digest", digest, f"docker pull ghcr.io/acme/app@{digest}")
    go_sum = "h1:" + base64.b64encode(hashlib.sha256(b"go module zip").digest()).decode()
    add("go.sum hash", go_sum, f"golang.org/x/net v0.33.0 {go_sum}")
    png = base64.b64encode(_png(2, 2)).decode()
    add("png data uri", png, f'<img src="data:image/png;base64,{png}" alt="dot">')
    nix = _nix_hash()
    add("nix store path", nix, f"/nix/store/{nix}-python3-3.12.7/bin/python3")
    return tuple(cases)


LOOKALIKES: tuple[LookAlike, ...] = _build()
