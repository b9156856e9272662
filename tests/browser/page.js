// Every page at a desktop's width (A.9.3's: `a93`), checked inside the page in one round trip: its problems.
window.inspectPage = ([source, stored, a93]) => {
  const content = document.querySelector(".md-content") || document.body;
  const room = content.querySelector("article")?.clientWidth || content.clientWidth;
  const latex = new RegExp(String.raw`\\(frac|sigma|partial|sum|prod|cdot|times|mathbf|mathrm|left|right|quad|begin)\b`
    + String.raw`|\$\$|\$[^$\s][^$]*[\\^_][^$]*\$`);
  const cells = [...content.querySelectorAll(".jp-CodeCell")].filter(cell => !cell.querySelector(".jp-CodeCell"));
  const withOutput = cells.filter(cell => cell.querySelector(".jp-OutputArea-output")).length;
  const problems = [
    // Code blocks and their copy buttons (Material: button[data-clipboard-target] in the <pre>).
    ...each(content.querySelectorAll("pre > code:not(.no-copy, .no-copy *)"), (code, i) => {
      const name = `code block ${i + 1} ${snippet(code.textContent)}`;
      const button = code.parentElement.querySelector(
        "button:is(.md-clipboard, [data-md-type=copy])[data-clipboard-target]");
      return !button ? `${name} has no copy button`
        : document.querySelector(button.dataset.clipboardTarget) !== code
          ? `${name}: its copy button copies ${button.dataset.clipboardTarget}, which is not this block`
        : !code.textContent.trim() && `${name}: its copy button's target is empty`;
    }),
    // Math: MathML rendered at build time must be laid out (hidden tabs and closed details aside).
    ...each(content.querySelectorAll("math"), (math, i) => [
      shown(math) && !sized(math) && `math ${i + 1} ${snippet(math.textContent)} has an empty bounding box`,
      math.querySelector("merror") && `math ${i + 1} ${snippet(math.textContent)} contains <merror>`]),
    // LaTeX that was never rendered: in prose, outside code and math.
    ...each(textNodes(content), node => latex.test(node.textContent)
      && !node.parentElement.closest("pre, code, math, script, style, svg, textarea")
      && `raw LaTeX in the text: ${snippet(node.textContent)}`),
    // Diagrams: an inline SVG in every figure.diagram, laid out; much narrower than drawn and the column, unreadable.
    ...each(content.querySelectorAll("figure.diagram"), (figure, i) => {
      const svg = figure.querySelector("svg"), drawn = svg?.viewBox.baseVal?.width;
      const width = svg?.getBoundingClientRect().width, space = Math.min(drawn || Infinity, room);
      return !svg ? `diagram ${i + 1} has no <svg>` : !shown(svg) || !sized(svg) ? `diagram ${i + 1} is not visible`
        : width < 0.75 * space && `diagram ${i + 1} is shown ${Math.round(width)} px wide, drawn ${drawn} px wide, ` +
          `with ${Math.round(space)} px of room: give figure.diagram (and its svg) the full width of the column`;
    }),
    // Accessible names, hidden drawings too (axe skips them): every <img> has alt text, every svg[role=img] a name,
    // (tests/test_site_build.py: each id it names is on one element of its page).
    ...each(document.querySelectorAll("img"), img => !img.alt.trim() && `<img src="${img.src}"> has no alt`),
    ...each(document.querySelectorAll('svg[role="img"]'), (svg, i) => ![svg.getAttribute("aria-label"),
      ...(svg.getAttribute("aria-labelledby") || "").split(/\s+/).map(id => document.getElementById(id)?.textContent)]
      .some(text => text?.trim()) && `svg[role=img] ${i + 1} has no accessible name (aria-labelledby or aria-label)`),
    // Notebooks (mkdocs-jupyter): outputs shown and not empty, under as many cells as the notebook has them.
    stored !== null && (!withOutput || withOutput !== stored) && `notebook page shows outputs under ${withOutput} ` +
      `of its ${cells.length} code cells, ${source} has ${stored} with outputs`,
    ...each(content.querySelectorAll(".jp-OutputArea-output"), (out, i) => (!shown(out) || !sized(out)
      || !out.innerText.trim() && !out.querySelector("img, svg, canvas, table"))
      && `notebook output ${i + 1} is empty or not shown`),
    ...coveredCode(),
    ...a93 ? codeWraps() : [],
    // The book's parts on A.9.3 that a phone shows folded and a desktop open (docs/assets/open-wide.js).
    ...[...document.querySelectorAll("details[data-open-wide]:not([open]) > summary")]
      .map(summary => `the book's part '${summary.textContent}' is folded on a desktop`),
  ];
  const [dark, light] = ["slate", "default"].map(switchPalette);  // a diagram's colour follows the palette
  return [...problems, ...light.map((colour, i) => colour === dark[i]
    && `diagram ${i + 1} has the same colour (${colour}) in the light and the dark palette`), ...textContrast()]
    .filter(Boolean);
};

// On A.9.3, every code block (folded ones opened) wraps rather than scrolls, each line a block of its own, and a line
// that wraps has the bar beside its continued rows.
function codeWraps() {
  const closed = [...document.querySelectorAll(".md-content details:not([open])")];
  closed.forEach(d => { d.open = true; });
  const problems = each(document.querySelectorAll(".md-content pre > code"), (code, i) => {
    const name = `code block ${i + 1} ${snippet(code.textContent)}`, lines = code.textContent.split("\n").length - 1;
    if (scrolls(code)) return `${name} hides ${code.scrollWidth - code.clientWidth} px behind a sideways scroll`;
    const blocks = [...code.children].filter(line => getComputedStyle(line).display === "block");
    if (blocks.length !== lines) return `${name}: ${blocks.length} of its ${lines} lines are blocks, which mark a wrap`;
    return blocks.map(line => [line, getComputedStyle(line)]).filter(([line, style]) =>
      line.getBoundingClientRect().height > 1.5 * parseFloat(style.lineHeight) && style.backgroundImage === "none")
      .slice(0, 1).map(([line]) => `${name}: the line ${snippet(line.textContent, 40)} wraps with no mark beside it`);
  });
  closed.forEach(d => { d.open = false; });
  return problems;
}
