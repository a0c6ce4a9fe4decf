// Numbers as compare.run prints them (compare/fmt.py, compare/output/tables.py), so that a
// value reads the same in the tab, report.md and the terminal. Python formats with
// round-half-even on exact ties; toFixed rounds them up: fixed() follows Python.

export function fixed(x, digits) {
  const ax = Math.abs(x);
  let text = ax.toFixed(digits);
  const scale = 10 ** digits;
  const scaled = ax * scale;
  if (scaled % 1 === 0.5 && (Math.floor(scaled) + 0.5) / scale === ax) {
    const down = Math.floor(scaled);
    text = ((down % 2 === 0 ? down : down + 1) / scale).toFixed(digits);
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
