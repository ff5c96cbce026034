"""Prints how many time-axis ticks an --emit=svg timeline has and whether
every one lies inside the picture: 'N inside', else (largest x, width)."""
import re
import sys

svg = open(sys.argv[1]).read()
width = float(re.search(r'<svg[^>]* width="([0-9.]+)"', svg).group(1))
ticks = [float(x) for x in re.findall(
    r'<text x="([0-9.]+)"[^>]*>[0-9.]+ (?:ms|s|steps|units)</text>', svg)]
print(len(ticks), "inside" if ticks and max(ticks) <= width
      else (max(ticks, default=None), width))
