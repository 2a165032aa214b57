# Independent check of the version-2 goldens: HChaCha20 by hand, then the
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
# GOLDEN_BOTH frames of memo-runtime/src/envelope.rs); prints each one's
# compression byte and plaintext body.
key=bytes([7]*32); path=b"m/r/1/k"
for golden in sys.argv[1:]:
    f=bytes.fromhex(golden)
    assert zlib.crc32(f[:-4])==struct.unpack('<I',f[-4:])[0]
    header=f[:20]; body=f[20:-4]
    nonce=body[:24]; ct=body[24:]
    sub=hchacha(key,nonce[:16])
    pt=ChaCha20Poly1305(sub).decrypt(b'\0\0\0\0'+nonce[16:], ct, b"memo frame v2\0"+header+path)
    print(header[6], pt.hex())
