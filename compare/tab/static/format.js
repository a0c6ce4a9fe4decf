// Numbers as compare.run prints them (compare/fmt.py, compare/output/tables.py), so that a
// value reads the same in the tab, report.md and the terminal. Python formats with
// round-half-even on exact ties; toFixed rounds them up: fixed() follows Python.

export function fixed(x, digits) {
  const ax = Math.abs(x);
  let text = ax.toFixed(digits);
  // toFixed is exact: 40 more digits show whether ax is exactly halfway (a double near our
  // magnitudes that is not differs within them)
  const exact = ax.toFixed(Math.min(100, digits + 40));
  const point = exact.indexOf('.');
  const cut = digits ? point + 1 + digits : point;
  if (/^50*$/.test(exact.slice(point + 1 + digits))) {
    const kept = exact.slice(0, cut);
    if (Number(kept[kept.length - 1]) % 2 === 0) text = kept;  // else toFixed's up is even
  }
  return (x < 0 || Object.is(x, -0) ? '-' : '') + text;
}

// compare.fmt.duration: "135 us" below 1 ms, "8.9 ms" below 1 s, else "4.35 s".
export function duration(us) {
  if (us === null || us === undefined) return 'n/a';
  if (Math.abs(us) < 1e3) return `${fixed(us, 0)} us`;
  if (Math.abs(us) < 1e6) return `${fixed(us / 1e3, 1)} ms`;
  return `${fixed(us / 1e6, 2)} s`;
}

// compare.output.tables.cell: a table's dash for nothing.
export function cell(us) {
  return us ? duration(us) : '-';
}

// The op table's delta: a sign, then the size ("-8.4 ms", "+2.4 ms", "0 us").
export function delta(us) {
  const sign = us > 0 ? '+' : us < 0 ? '-' : '';
  return sign + duration(Math.abs(us));
}

export function ratio(x) {
  return x ? `${fixed(x, 1)}x` : '-';
}

export function share(x) {
  return `${fixed(x * 100, 0)}%`;
}
