// Every page at a phone's width (A.9.3's: `a93`), checked inside the page: its problems.
const MIN_TEXT_PX = 9, MIN_CODE_SHARE = 0.75, BREAKS_AFTER = "._/- ";

window.inspectPhone = a93 => {
  const content = document.querySelector(".md-content article") || document.querySelector(".md-content");
  const column = content.clientWidth, columnBox = content.getBoundingClientRect(), page = document.documentElement;
  // No sideways scroll: name the innermost element that sticks out of the window.
  const out = el => el.getBoundingClientRect().right > page.clientWidth + 1;
  const culprit = page.scrollWidth > page.clientWidth && [...document.body.querySelectorAll("*:not(svg *)")]
    .find(el => out(el) && ![...el.children].some(out));
  return [page.scrollWidth > page.clientWidth && `the page scrolls sideways (${page.scrollWidth} px in a ` +
    `${page.clientWidth} px window): ${culprit ? `${tag(culprit)} ${snippet(culprit.textContent)}` : "?"}`,
    // Code blocks, notebook cells included, keep most of the column (MIN_CODE_SHARE).
    ...each([...content.querySelectorAll("pre")].filter(wide).map(pre => [pre, pre.getBoundingClientRect().width]),
      ([pre, width], i) => width < MIN_CODE_SHARE * column && `code block ${i + 1} ${snippet(pre.textContent)} is ` +
        `${Math.round(width)} px wide in a ${column} px column (less than ${MIN_CODE_SHARE * 100}%)`),
    // Output wraps: recorded output (text blocks) and notebook outputs never scroll sideways.
    ...each(content.querySelectorAll(".language-text pre > code, .jp-OutputArea-output pre"), out => wide(out)
      && scrolls(out) && `output ${snippet(out.textContent)} does not wrap: ${out.scrollWidth} px of text in ` +
      `${out.clientWidth} px`),
    // Diagrams and plots whole (one drawing shown: a narrow variant), inside the column and viewBox; text readable.
    ...each(content.querySelectorAll("figure.diagram, figure.plot"), (figure, i) => {
      const name = `${figure.classList.contains("plot") ? "plot" : "diagram"} ${i + 1}`;
      const svgs = [...figure.querySelectorAll(":scope > svg")].filter(wide);
      if (svgs.length !== 1) return `${name} shows ${svgs.length} drawings, not 1`;
      const svg = svgs[0], box = svg.getBoundingClientRect(), drawn = svg.getBBox(), view = svg.viewBox.baseVal;
      const cut = box.left < columnBox.left - 1 || box.right > columnBox.right + 1 || scrolls(figure);
      const outside = drawn.x < view.x - 1 || drawn.y < view.y - 1 || drawn.x + drawn.width > view.x + view.width + 1
        || drawn.y + drawn.height > view.y + view.height + 1;
      const scale = svg.getScreenCTM()?.a || 0;
      const small = [...svg.querySelectorAll("text")].map(t => [t, parseFloat(getComputedStyle(t).fontSize) * scale])
        .filter(([, px]) => px < MIN_TEXT_PX);
      return [cut && `${name} is cut: ${Math.round(box.width)} px wide in a ${Math.round(columnBox.width)} px column`,
        outside && `${name} draws outside its viewBox (${view.width} × ${view.height}): content from ` +
          `(${drawn.x.toFixed(0)}, ${drawn.y.toFixed(0)}), ${drawn.width.toFixed(0)} × ${drawn.height.toFixed(0)}`,
        small.length && `${name}: ${small.length} labels under ${MIN_TEXT_PX} px, e.g. ` +
          `${snippet(small[0][0].textContent)} at ${small[0][1].toFixed(1)} px`];
    }),
    // Output titles stay one line; what an output depends on goes in a note under it.
    ...each([...content.querySelectorAll(".language-text > .filename")].filter(wide), title => {
      const style = getComputedStyle(title), lines = (title.clientHeight - parseFloat(style.paddingTop)
        - parseFloat(style.paddingBottom)) / parseFloat(style.lineHeight);
      return lines > 1.5 && `output title ${snippet(title.textContent)} takes ${Math.round(lines)} lines`;
    }),
    // Formulas and tables fit the column: nothing of them behind a sideways scroll.
    ...each(content.querySelectorAll('math[display="block"], .md-typeset__scrollwrap'), el => wide(el) && scrolls(el)
      && `${el.matches("math") ? "formula" : "table"} ${snippet(el.textContent)} is ${el.scrollWidth} px wide in ` +
      `${el.clientWidth} px: ${el.matches("math") ? "split it into rows (\\begin{array}{rl})"
        : "its last columns are off screen"}`),
    // Identifiers in tables wrap only after a dot, an underscore, a slash or a hyphen (the browser's), or at a space.
    ...each(content.querySelectorAll("table code"), code => {
      const range = document.createRange(), chars = textNodes(code).flatMap(node => node.data.split("").map((c, k) => {
        range.setStart(node, k); range.setEnd(node, k + 1);
        return [c, range.getBoundingClientRect().top];
      }));
      return chars.map(([, top], k) => k && top > chars[k - 1][1] + 2 && !BREAKS_AFTER.includes(chars[k - 1][0])
        && `table cell: ${snippet(code.textContent)} wraps in the middle of a word, after "${chars[k - 1][0]}"`);
    }),
    ...coveredCode(),
    ...a93 ? [...codeWraps(), ...shortA93()] : [],
  ].filter(Boolean);
};

// A.9.3: the book's scripts first, ours folded away: with every collapsible closed, at most 12 screens long, and the
// list of what our scripts change fits one.
function shortA93() {
  const open = [...document.querySelectorAll("details[open]")], list = document.querySelector(".script-changes");
  open.forEach(d => { d.open = false; });
  const [height, changes] = [document.documentElement.scrollHeight, list?.getBoundingClientRect().height || 0]
    .map(length => length / innerHeight);  // in phone screens
  open.forEach(d => { d.open = true; });
  return [height > 12 && `${height.toFixed(1)} phone screens long, more than 12`, changes > 1
    && `the list of what our scripts change takes ${changes.toFixed(1)} phone screens, not one`];
}

// Output lines of one row (matching `selector`), for the test to look beside each for a mark, by the pixels: each
// one's bar (its padding) in the page, and its text's start.
window.unwrappedLines = selector => [...document.querySelectorAll(selector)].flatMap(line => {
  const box = line.getBoundingClientRect(), style = getComputedStyle(line);
  if (!line.checkVisibility() || box.height > 1.5 * parseFloat(style.lineHeight)) return [];
  return [[box.left + scrollX, box.top + scrollY, box.left + scrollX + parseFloat(style.paddingLeft),
           box.bottom + scrollY, line.textContent.trim().slice(0, 30)]];
});
