# Independent check of the version-2 and version-3 goldens: HChaCha20 by hand, then the
# IETF ChaCha20-Poly1305 of `cryptography`, zstd via the zstd CLI.
import struct, zlib
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
def rotl(v,c): return ((v<<c)&0xffffffff)|(v>>(32-c))
def qr(s,a,b,c,d):
    s[a]=(s[a]+s[b])&0xffffffff; s[d]^=s[a]; s[d]=rotl(s[d],16)
    s[c]=(s[c]+s[d])&0xffffffff; s[b]^=s[c]; s[b]=rotl(s[b],12)
    s[a]=(s[a]+s[b])&0xffffffff; s[d]^=s[a]; s[d]=rotl(s[d],8)
    s[c]=(s[c]+s[d])&0xffffffff; s[b]^=s[c]; s[b]=rotl(s[b],7)
def hchacha(key, n16):
    s=list(struct.unpack('<4I',b'expand 32-byte k'))+list(struct.unpack('<8I',key))+list(struct.unpack('<4I',n16))
    for _ in range(10):
        qr(s,0,4,8,12);qr(s,1,5,9,13);qr(s,2,6,10,14);qr(s,3,7,11,15)
        qr(s,0,5,10,15);qr(s,1,6,11,12);qr(s,2,7,8,13);qr(s,3,4,9,14)
    return struct.pack('<8I',*(s[0:4]+s[12:16]))
import sys
# Usage: python3 tools/check_sealed_goldens.py HEX... (the GOLDEN_ENCRYPTED and
# GOLDEN_BOTH frames of memo-runtime/src/envelope.rs, version 2, and the
# GOLDEN_DATA_KEY, GOLDEN_DATA_KEY_COMPRESSED and GOLDEN_GENERATION frames,
# version 3); prints each one's version, compression byte and plaintext body
# (and, for version 3, the data key's id and generation).
path=b"m/r/1/k"
for golden in sys.argv[1:]:
    f=bytes.fromhex(golden)
    assert f[:4]==b"MEMO" and f[4] in (2,3)
    assert zlib.crc32(f[:-4])==struct.unpack('<I',f[-4:])[0]
    if f[4]==2:
        # A keyring's key of version 1: all bytes 7.
        key=bytes([7]*32); header=f[:20]; domain=b"memo frame v2\0"
    else:
        # The data key of id 1, generation 1 (or of id 0, a standalone
        # run's, of a generation; named at bytes 12..20 and 8..12): all
        # bytes 9.
        assert struct.unpack('<Q',f[12:20])[0] in (0,1)
        key=bytes([9]*32); header=f[:28]; domain=b"memo frame v3\0"
    body=f[len(header):-4]
    assert struct.unpack('<Q',header[-8:])[0]==len(body)
    nonce=body[:24]; ct=body[24:]
    sub=hchacha(key,nonce[:16])
    pt=ChaCha20Poly1305(sub).decrypt(b'\0\0\0\0'+nonce[16:], ct, domain+header+path)
    extra=' id %d generation %08x'%(struct.unpack('<Q',f[12:20])[0],struct.unpack('<I',f[8:12])[0]) if f[4]==3 else ''
    print(f[4], header[6], pt.hex()+extra)
