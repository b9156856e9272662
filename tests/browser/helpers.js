// What the checks share. tests/test_browser.py runs the files here as one script in each page, and calls by name
// what they set on `window`: a check returns its problems.
const shown = el => el.checkVisibility();
const sized = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
const wide = el => el.checkVisibility() && el.getBoundingClientRect().width > 0;
const scrolls = el => el.scrollWidth > el.clientWidth + 1;
const snippet = (text, n = 50) => JSON.stringify(text.trim().replace(/\s+/g, " ").slice(0, n));
const tag = el => `<${el.tagName.toLowerCase()} class="${el.getAttribute("class") || ""}">`;
// What `check` finds wrong with each of `elements` (given with its index): a message, a list, or nothing.
const each = (elements, check) => [...elements].flatMap((el, i) => [check(el, i)].flat()).filter(Boolean);
const textNodes = (root, all = document.evaluate(".//text()", root, null, XPathResult.ORDERED_NODE_SNAPSHOT_TYPE)) =>
  Array.from({length: all.snapshotLength}, (_, i) => all.snapshotItem(i));  // in document order
// Sets the palette as the toggle does; each diagram's colour (its text and lines use currentColor).
window.switchPalette = scheme => { document.body.setAttribute("data-md-color-scheme", scheme);
  return [...document.querySelectorAll(".md-content figure.diagram svg")].map(svg => getComputedStyle(svg).color); };
// Colours as [r, g, b, alpha]; `top` painted over `under`; WCAG's contrast ratio.
const rgba = colour => { const [r, g, b, a = 1] = colour.match(/[\d.]+/g).map(Number); return [r, g, b, a]; };
const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3])).concat(1);
const luminance = c => c.slice(0, 3).map(v => (v /= 255) <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
  .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
const contrast = (a, b) => [a, b].map(luminance).sort((p, q) => q - p).reduce((x, y) => (x + 0.05) / (y + 0.05));
// A code block's copy button covers none of its text (as laid out, unscrolled), at either width.
function coveredCode() {
  const range = document.createRange(), overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  return each(document.querySelectorAll(".md-content pre > .md-code__nav"), nav => {
    const code = nav.parentElement.querySelector("code"), button = nav.getBoundingClientRect();
    if (!code || !nav.checkVisibility()) return;
    const box = code.getBoundingClientRect(), covered = textNodes(code).filter(node => node.data.trim()).find(node => {
      range.selectNodeContents(node);
      return [...range.getClientRects()].some(r => overlap(r, button) && overlap(r, box));
    });
    return covered && `the copy button covers ${snippet(covered.data, 30)} in the code block ` +
      snippet(code.textContent, 40);
  });
}
window.hrefs = links => links.map(a => a.href);  // for a test's locator
// Search previews show prose: a code block of more than 80 lines in one is a whole script (150+ lines), not a section.
window.scriptsInPreviews = query => each(document.querySelectorAll(".md-search-result__article pre"), pre => {
  const lines = pre.textContent.split("\n").length;
  return lines > 80 && `the search preview of ${pre.closest("a").getAttribute("href")} for ${query} shows ${lines} ` +
    "lines of code, not prose";
});
