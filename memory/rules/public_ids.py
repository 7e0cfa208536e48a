"""Random-looking runs whose own structure proves them public: an encoding that carries a checksum or
a self-description a random credential cannot satisfy by chance, and whose version or type field
says it names something public.

- base58check (Bitcoin's BIP-13 addresses): version byte + 20-byte hash + the first 4 bytes of a
  double SHA-256. Version 0x00 (P2PKH, `1…`), 0x05 (P2SH, `3…`) and their testnet twins 0x6F, 0xC4
  are addresses; a WIF private key (0x80) is base58check too and stays a secret.
- bech32 / bech32m segwit addresses (BIP-173, BIP-350): the BCH checksum over the human-readable part
  and the data, and a standard witness program (version 0 with 20 or 32 bytes, version 1 with 32). A
  bech32 secret (a Nostr `nsec`, an age key) holds a bare key, never a witness program.
- IPFS CIDs (multiformats): CIDv0 is base58btc of a sha2-256 multihash (0x12 0x20 + 32 bytes);
  CIDv1 is multibase base32 (`b…`) of version 1, a codec varint and a multihash whose length byte
  matches the digest that follows, to the byte.
- Base64 of a file whose leading bytes are its format's signature (PNG, JPEG, GIF, WebP, PDF): an
  inline image, not a key.

A random string passes one of these checks about once in 2³² (the checksums) or needs a fixed run of
leading bytes (the CID and file headers), so no credential's shape is opened by them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX = {c: i for i, c in enumerate(_B58)}
_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_BECH32_INDEX = {c: i for i, c in enumerate(_BECH32)}
_BECH32_CONSTANTS = {1: 0, 0x2BC830A3: 1}  # the checksum constant → the witness versions it serves
_ADDRESS_VERSIONS = (0x00, 0x05, 0x6F, 0xC4)
# Private keys in the same encodings: WIF (0x80 / testnet 0xEF + 32 bytes, + 0x01 when compressed)
# and BIP-32 extended private keys (xprv 0x0488ADE4, tprv 0x04358394; 78 bytes).
_WIF_VERSIONS = (0x80, 0xEF)
_XPRV_VERSIONS = (bytes.fromhex("0488ade4"), bytes.fromhex("04358394"))
_FILE_SIGNATURES = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"%PDF-")


def is_public_id(run: str) -> bool:
    """`run` is an address, a content id or an inline file by its own checksum or header."""
    if len(run) > 128:
        return _file_base64(run)
    return _base58check_address(run) or _segwit_address(run) or _cid(run) or _file_base64(run)


def is_secret_encoding(run: str) -> bool:
    """`run` is a private key by its own checksum and version (a WIF key, an xprv) or a bech32 string
    whose human-readable part names a secret (Nostr's `nsec`, age's `AGE-SECRET-KEY-`): a secret
    whatever the words around it call it."""
    if 50 <= len(run) <= 112:
        raw = _b58decode(run)
        if raw is not None and _checksum_ok(raw):
            wif = raw[0] in _WIF_VERSIONS and len(raw) in (37, 38)
            if wif or (len(raw) == 82 and raw[:4] in _XPRV_VERSIONS):
                return True
    hrp, sep, _ = run.lower().rpartition("1")
    return bool(sep) and (hrp.endswith("sec") or "secret" in hrp) and _bech32_constant(run) is not None


def _checksum_ok(raw: bytes) -> bool:
    return len(raw) > 4 and hashlib.sha256(hashlib.sha256(raw[:-4]).digest()).digest()[:4] == raw[-4:]


def _b58decode(text: str) -> bytes | None:
    number = 0
    for char in text:
        digit = _B58_INDEX.get(char)
        if digit is None:
            return None
        number = number * 58 + digit
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return b"\0" * (len(text) - len(text.lstrip("1"))) + body


def _base58check_address(run: str) -> bool:
    raw = _b58decode(run) if 25 <= len(run) <= 35 else None
    return raw is not None and len(raw) == 25 and raw[0] in _ADDRESS_VERSIONS and _checksum_ok(raw)


def bech32_polymod(values: list[int]) -> int:
    """BIP-173's checksum function over 5-bit values (the encoder in the tests shares it)."""
    generator = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
    check = 1
    for value in values:
        top = check >> 25
        check = (check & 0x1FFFFFF) << 5 ^ value
        for i in range(5):
            if (top >> i) & 1:
                check ^= generator[i]
    return check


def _bech32_constant(run: str) -> int | None:
    """The checksum constant of a well-formed bech32/bech32m string (one case throughout), or None."""
    if not 8 <= len(run) <= 90 or (run != run.lower() and run != run.upper()):
        return None
    hrp, sep, data_part = run.lower().rpartition("1")
    if not sep or not hrp or len(data_part) < 7 or any(c not in _BECH32_INDEX for c in data_part):
        return None
    data = [_BECH32_INDEX[c] for c in data_part]
    expanded = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    constant = bech32_polymod(expanded + data)
    return constant if constant in _BECH32_CONSTANTS else None


def _segwit_address(run: str) -> bool:
    """A BIP-173/350 address with a standard witness program (its version matching the checksum)."""
    constant = _bech32_constant(run) if len(run) >= 14 else None
    if constant is None:
        return False
    data = [_BECH32_INDEX[c] for c in run.lower().rpartition("1")[2]]
    version, program = data[0], _from_5bit(data[1:-6])
    if program is None or (version == 0) != (_BECH32_CONSTANTS[constant] == 0):
        return False
    return (version, len(program)) in ((0, 20), (0, 32), (1, 32))


def _from_5bit(groups: list[int]) -> bytes | None:
    """The bytes of 5-bit groups, or None when the padding is not zero bits of fewer than 5."""
    acc = bits = 0
    out = bytearray()
    for group in groups:
        acc = acc << 5 | group
        bits += 5
        if bits >= 8:
            bits -= 8
            out.append(acc >> bits & 0xFF)
    if bits >= 5 or acc & ((1 << bits) - 1):
        return None
    return bytes(out)


def _cid(run: str) -> bool:
    if len(run) == 46 and run.startswith("Qm"):
        raw = _b58decode(run)
        return raw is not None and len(raw) == 34 and raw[:2] == b"\x12\x20"
    if len(run) < 10 or not run.startswith("b") or run != run.lower():
        return False
    body = run[1:].upper()
    try:
        raw = base64.b32decode(body + "=" * (-len(body) % 8))
    except binascii.Error:
        return False
    return _cid_v1_bytes(raw)


def _cid_v1_bytes(raw: bytes) -> bool:
    """Version 1, a codec, then a multihash whose declared length is exactly what remains."""
    at = 0
    fields: list[int] = []
    for _ in range(3):  # version, codec, hash function
        value, at = _varint(raw, at)
        if value is None:
            return False
        fields.append(value)
    length, at = _varint(raw, at)
    return fields[0] == 1 and length is not None and length >= 16 and len(raw) - at == length


def _varint(raw: bytes, at: int) -> tuple[int | None, int]:
    value = shift = 0
    while at < len(raw) and shift < 63:
        byte = raw[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    return None, at


def _file_base64(run: str) -> bool:
    """Standard base64 (padded) whose first bytes are a media file's signature."""
    head = run[:24]
    if len(run) < 24 or len(run) % 4:
        return False
    try:
        raw = base64.b64decode(head, validate=True)
    except binascii.Error:
        return False
    return raw.startswith(_FILE_SIGNATURES) or (raw[:4] == b"RIFF" and raw[8:12] == b"WEBP")
