// Elements built from data, never from HTML text: names from traces are shown, not parsed.
const SVG_NS = 'http://www.w3.org/2000/svg';

function fill(node, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children || []) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function el(tag, attrs = {}, children = []) {
  return fill(document.createElement(tag), attrs, children);
}

export function svg(tag, attrs = {}, children = []) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}
