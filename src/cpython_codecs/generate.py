"""Generates the tables src/cpython_codecs.rs reads: which byte sequences
CPython's own codecs decode, for every encoding a `coding:` cookie can name
that hookfence decodes through the WHATWG registry (encoding_rs), whose
tables accept more (cp1252 0x81, gbk 0x80, euc-jp 0xADA1, big5 0xF9FE, ...).

Run with the CPython whose rules are meant (the files name 3.11's):
    python3 src/cpython_codecs/generate.py

Writes, next to this script:
  labels.txt   one line per WHATWG label: the label as CPython normalises a
               cookie (lowercase, runs of other characters than letters,
               digits and `.` as one `_`), then the codec CPython names it
               (`-` where CPython knows no such encoding);
  <codec>.bin  for each codec a label names: 16 bytes, bit b-0x80 set where
               the byte b (0x80..0xFF) decodes alone; for a multi-byte codec
               4096 more, bit (lead-0x80)*256+trail set where the pair
               decodes as one sequence; for euc_jp 8192 more, bit
               b2*256+b3 for 0x8F b2 b3.
"""
import codecs
import os
import re

LABELS = """unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8 866 cp866 csibm866 ibm866 csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2 csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3 csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4 csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 iso_8859-5:1988 arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987 csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 iso88598 iso_8859-8 iso_8859-8:1988 visual csiso88598i iso-8859-8-i logical csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6 iso-8859-13 iso8859-13 iso885913 iso-8859-14 iso8859-14 iso885914 csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9 iso-8859-16 cskoi8r koi koi8 koi8-r koi8_r koi8-ru koi8-u csmacintosh mac macintosh x-mac-roman dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874 cp1250 windows-1250 x-cp1250 cp1251 windows-1251 x-cp1251 ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252 cp1253 windows-1253 x-cp1253 cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254 cp1255 windows-1255 x-cp1255 cp1256 windows-1256 x-cp1256 cp1257 windows-1257 x-cp1257 cp1258 windows-1258 x-cp1258 x-mac-cyrillic x-mac-ukrainian chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk gb18030 big5 big5-hkscs cn-big5 csbig5 x-x-big5 cseucpkdfmtjapanese euc-jp x-euc-jp csiso2022jp iso-2022-jp csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 ksc5601 ksc_5601 windows-949 csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr replacement unicodefffe utf-16be csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le x-user-defined""".split()

# Codecs whose tables are written: the stateless, ASCII-compatible ones.
STATEFUL_OR_NOT_ASCII = {"utf-8", "ascii", "iso2022_jp", "iso2022_kr", "hz", "utf-16", "utf-16-be", "utf-16-le", "gb18030"}


def normal(label):
    return re.sub(r"[^a-z0-9.]+", "_", label.lower()).strip("_")


def decodes(codec, data):
    try:
        codecs.decode(data, codec)
        return True
    except UnicodeDecodeError:
        return False


def tables(codec):
    single = bytearray(16)
    singles = set()
    for b in range(0x80, 0x100):
        if decodes(codec, bytes([b])):
            single[(b - 0x80) // 8] |= 1 << ((b - 0x80) % 8)
            singles.add(b)
    pair = bytearray(4096)
    for lead in range(0x80, 0x100):
        if lead in singles:
            continue
        for trail in range(0x100):
            data = bytes([lead, trail])
            # One sequence of two bytes, not a lead the decoder wants more for.
            if decodes(codec, data):
                bit = (lead - 0x80) * 256 + trail
                pair[bit // 8] |= 1 << (bit % 8)
    if not any(pair):
        return bytes(single)
    out = bytes(single) + bytes(pair)
    if codec == "euc_jp":
        triple = bytearray(8192)
        for b2 in range(0x100):
            for b3 in range(0x100):
                if decodes(codec, bytes([0x8F, b2, b3])):
                    bit = b2 * 256 + b3
                    triple[bit // 8] |= 1 << (bit % 8)
        out += bytes(triple)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    lines = []
    wanted = set()
    for label in LABELS:
        try:
            codec = codecs.lookup(label).name
        except LookupError:
            codec = "-"
        lines.append("%s %s" % (normal(label), codec))
        if codec != "-" and codec not in STATEFUL_OR_NOT_ASCII:
            wanted.add(codec)
    with open(os.path.join(here, "labels.txt"), "w") as f:
        f.write("\n".join(sorted(set(lines))) + "\n")
    for codec in sorted(wanted):
        with open(os.path.join(here, codec + ".bin"), "wb") as f:
            f.write(tables(codec))
    print("wrote labels.txt and %d tables" % len(wanted))


if __name__ == "__main__":
    main()
