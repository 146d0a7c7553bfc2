#!/usr/bin/env python3
"""Tokenizes any text with tiktoken into the files llm.c writes, for `ampc train --data tokens:...`.

    python3 examples/make_tokens.py TEXT [--out DIR] [--encoding gpt2] [--val-fraction F]

Writes, in DIR (default: the current directory):

  tokens.bin     the token ids in llm.c's data format (with --val-fraction F > 0: train.bin, the first
                 1 - F of the ids, and val.bin, the rest), which ampc reads with --data tokens:FILE
                 (or tokens:train.bin,val.bin):
                   header  256 int32 little-endian: [0] = 20240520 (magic), [1] = 1 (version: uint16 ids),
                           [2] = the number of ids N, [3..255] = 0
                   ids     N uint16 little-endian
                 the file is exactly 1024 + 2 N bytes. As llm.c's tinyshakespeare.py does, every paragraph
                 (text between blank lines) is a document and starts with the end-of-text token.
  tokenizer.bin  the tokenizer in llm.c's tokenizer format, which `ampc sample` decodes with:
                   header  256 uint32 little-endian: [0] = 20240328 (magic), [1] = 2 (version: with the
                           end-of-text token), [2] = V, the number of ids (max token value + 1),
                           [3] = the end-of-text id, [4..255] = 0
                   then for each id 0 .. V-1 in order: one uint8, the length L of the token's bytes
                           (0 for an id the encoding does not define), then those L bytes (raw bytes, not
                           necessarily UTF-8 on their own)
                 llm.c writes the header as int32 (torch.int32); every value is below 2^31, so the bytes
                 are the same.

The ids must fit uint16, so the encoding must have at most 65536 ids: gpt2 (50257, padded by ampc's
default vocabulary to 50304, as llm.c pads it), r50k_base, p50k_base; not cl100k_base or o200k_base.
Needs tiktoken (pip install tiktoken). ampc itself never needs Python: nanoGPT's raw train.bin / val.bin
work as they are, and any program that writes the format above will do.
"""
import argparse
import array
import os
import struct
import sys

DATA_MAGIC, DATA_VERSION = 20240520, 1
TOKENIZER_MAGIC, TOKENIZER_VERSION = 20240328, 2


def write_data(path, ids):
    """llm.c's data file: the 1024-byte header, then the ids as uint16 little-endian."""
    if len(ids) >= 2**31:
        sys.exit(f"make_tokens.py: {len(ids)} tokens is more than one llm.c file holds (2^31 - 1)")
    header = [0] * 256
    header[0], header[1], header[2] = DATA_MAGIC, DATA_VERSION, len(ids)
    body = array.array("H", ids)
    if sys.byteorder != "little":
        body.byteswap()
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(body.tobytes())
    print(f"{path}: {len(ids):,} tokens ({1024 + 2 * len(ids):,} bytes)")


def write_tokenizer(path, enc):
    """llm.c's tokenizer file: the header, then per id a length byte and the token's bytes."""
    n = enc.max_token_value + 1
    header = [0] * 256
    header[0], header[1], header[2], header[3] = TOKENIZER_MAGIC, TOKENIZER_VERSION, n, enc.eot_token
    with open(path, "wb") as f:
        f.write(struct.pack("<256I", *header))
        for i in range(n):
            try:
                b = enc.decode_single_token_bytes(i)
            except KeyError:  # an id the encoding leaves undefined
                b = b""
            if len(b) > 255:
                sys.exit(f"make_tokens.py: token {i} is {len(b)} bytes; the format holds at most 255")
            f.write(struct.pack("<B", len(b)))
            f.write(b)
    print(f"{path}: {n:,} tokens, end-of-text {enc.eot_token}")


def tokenize(text, enc):
    """The end-of-text token before every paragraph, then its ids (special-token text is ordinary text)."""
    ids = []
    for doc in text.split("\n\n"):
        if doc.strip():
            ids.append(enc.eot_token)
            ids.extend(enc.encode_ordinary(doc + "\n\n"))
    return ids


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("text", help="any text file (UTF-8; undecodable bytes are replaced)")
    ap.add_argument("--out", default=".", help="the folder to write into (default: .)")
    ap.add_argument("--encoding", default="gpt2", help="a tiktoken encoding of at most 65536 ids (default: gpt2)")
    ap.add_argument("--val-fraction", type=float, default=0.0,
                    help="write train.bin and val.bin, the last F of the ids validating (default 0: tokens.bin)")
    args = ap.parse_args()
    if not 0 <= args.val_fraction < 1:
        sys.exit("make_tokens.py: --val-fraction must be in [0, 1)")
    try:
        import tiktoken
    except ImportError:
        sys.exit("make_tokens.py: needs tiktoken (pip install tiktoken)")
    enc = tiktoken.get_encoding(args.encoding)
    if enc.max_token_value >= 65536:
        sys.exit(f"make_tokens.py: {args.encoding} has {enc.max_token_value + 1} ids; uint16 token files hold "
                 "at most 65536 (use gpt2, r50k_base or p50k_base)")
    with open(args.text, encoding="utf-8", errors="replace") as f:
        ids = tokenize(f.read(), enc)
    if len(ids) < 2:
        sys.exit(f"make_tokens.py: {args.text} gives {len(ids)} tokens; ampc needs at least 2")
    os.makedirs(args.out, exist_ok=True)
    if args.val_fraction > 0:
        split = len(ids) - int(len(ids) * args.val_fraction + 0.5)
        write_data(os.path.join(args.out, "train.bin"), ids[:split])
        write_data(os.path.join(args.out, "val.bin"), ids[split:])
        spec = f"tokens:{os.path.join(args.out, 'train.bin')},{os.path.join(args.out, 'val.bin')}"
    else:
        write_data(os.path.join(args.out, "tokens.bin"), ids)
        spec = f"tokens:{os.path.join(args.out, 'tokens.bin')}"
    write_tokenizer(os.path.join(args.out, "tokenizer.bin"), enc)
    print(f"train with: ampc train --data {spec} --steps 1000")


if __name__ == "__main__":
    main()
