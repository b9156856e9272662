// Shown diagram and plot text against what is painted under it at three points, its colour composited the same way,
// in each palette (light last, as the page opened): 4.5:1 (WCAG AA for text), which axe cannot check on SVG text.
window.textContrast = () => ["slate", "default"].flatMap(scheme => {
  switchPalette(scheme);
  const opacity = el => el.localName === "figure" ? 1 : getComputedStyle(el).opacity * opacity(el.parentElement);
  const paint = (el, style = getComputedStyle(el)) => style.fill === "none" ? null
    : rgba(style.fill).map((v, i) => i < 3 ? v : v * style.fillOpacity * opacity(el));
  const page = rgba(getComputedStyle(document.body).backgroundColor);
  return each(document.querySelectorAll(".md-content :is(figure.diagram, figure.plot)"), (figure, i) => {
    const svg = [...figure.querySelectorAll(":scope > svg")].find(shown);
    return each(svg?.querySelectorAll("text") || [], text => {
      const box = text.getBoundingClientRect();
      if (!box.width || !text.textContent.trim()) return;
      const worst = Math.min(...[0.15, 0.5, 0.85].map(f => {
        const ground = document.elementsFromPoint(box.left + box.width * f, box.top + box.height / 2)
          .filter(el => svg.contains(el) && el.matches("rect, circle, ellipse, path, polygon, image")
                  && !el.closest("text, defs") && el.compareDocumentPosition(text) & Node.DOCUMENT_POSITION_FOLLOWING)
          .reverse().reduce((under, shape) => { const p = paint(shape); return p ? over(p, under) : under; }, page);
        return contrast(over(paint(text), ground), ground);
      }));
      return worst < 4.5 && `${scheme} palette: ${figure.classList.contains("plot") ? "plot" : "diagram"} ` +
        `${i + 1}: ${snippet(text.textContent, 40)} is ${worst.toFixed(2)}:1 against what lies under it`;
    });
  });
});

// The focused element (or a content tab's labels, the toggle's icon) shows a ring of 2 px that stands out, 3:1 or more
// (WCAG 2.2: 1.4.11, 2.4.13), in each palette (light last); null once focus has left the page.
window.focusRing = () => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const name = `${tag(el)} ${snippet(el.getAttribute("aria-label") || el.title || el.textContent, 40)}`;
  const ringed = el.matches(".tabbed-set > input") ? el.parentElement.querySelector(":scope > .tabbed-labels")
    : el.matches("input.md-option") ? el.nextElementSibling : el;
  const under = node => node  // the ancestors' backgrounds, composed from the page's up over white
    ? over(rgba(getComputedStyle(node).backgroundColor), under(node.parentElement)) : [255, 255, 255, 1];
  return ["slate", "default"].map(scheme => {
    switchPalette(scheme);
    if (!shown(ringed) || !sized(ringed)) return `${scheme} palette: ${name} takes a Tab stop but is not shown`;
    const style = getComputedStyle(ringed);
    if (style.outlineStyle === "none" || parseFloat(style.outlineWidth) < 2)
      return `${scheme} palette: ${name} shows no focus ring (outline: ${style.outlineStyle} ${style.outlineWidth})`;
    const behind = under(ringed.parentElement), ratio = contrast(rgba(style.outlineColor), behind);
    return ratio < 3 && `${scheme} palette: ${name}: its focus ring ${style.outlineColor} is ` +
      `${ratio.toFixed(2)}:1 against rgb(${behind.slice(0, 3).map(Math.round)}) behind it`;
  }).filter(Boolean);
};

// axe-core (the test adds it to the page) in a palette: WCAG 2.0 to 2.2, A and AA, and best practices in the light
// one; in the dark one, what the palette changes (the other rules gave the same). Each violation: where, what to fix.
window.axeViolations = async scheme => {
  switchPalette(scheme);
  const runOnly = scheme === "slate" ? {type: "rule", values: ["color-contrast", "link-in-text-block"]}
    : {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa", "best-practice"]};
  const {violations} = await axe.run(document, {runOnly, resultTypes: ["violations"]});
  const summary = node => node.failureSummary.replace(/^Fix (any|all) of the following:/, "").replace(/\s+/g, " ");
  return violations.flatMap(rule => rule.nodes.map(node =>
    `${rule.id} (${rule.impact}) at ${node.target.join(" ")}:${summary(node)}`));
};
