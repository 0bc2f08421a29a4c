"""GPT-2's byte-level alphabet (tokenizers' ByteLevel): the printable stand-in character of each
byte, shared by the scripts that write byte-level tokenizer files."""


def byte_alphabet():
    """{byte: its stand-in character}: printable Latin-1 bytes stand for themselves, the others
    for 256, 257, ... in byte order."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table
