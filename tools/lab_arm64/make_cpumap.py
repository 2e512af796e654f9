"""Replace /cpus/cpu-map in a decompiled QEMU virt DTS by one socket whose
clusters are the given CPU lists.  usage: make_cpumap.py IN.dts OUT.dts 0-3 4 5-8 9"""
import re, sys

src, dst, groups = sys.argv[1], sys.argv[2], sys.argv[3:]
s = open(src).read()
ph = {int(m.group(1), 16): m.group(2) for m in
      re.finditer(r"cpu@([0-9a-f]+) \{\s*phandle = <(0x[0-9a-f]+)>;", s)}


def cpus(spec):
    a, _, b = spec.partition("-")
    return range(int(a), int(b or a) + 1)


out = ["\t\tcpu-map {\n\n\t\t\tsocket0 {\n"]
for ci, g in enumerate(groups):
    out.append(f"\n\t\t\t\tcluster{ci} {{\n")
    for k, c in enumerate(cpus(g)):
        out.append(f"\n\t\t\t\t\tcore{k} {{\n\t\t\t\t\t\tcpu = <{ph[c]}>;\n\t\t\t\t\t}};\n")
    out.append("\t\t\t\t};\n")
out.append("\t\t\t};\n\t\t};\n\n")
start = s.index("\t\tcpu-map {")
end = s.index("\t\tcpu@0 {")
open(dst, "w").write(s[:start] + "".join(out) + s[end:])
