// What Material's chrome and mkdocs-jupyter's cells leave out for screen readers and keyboards, set on
// every page, instant navigation included (docs/assets/extra.css has the colours and the focus ring).
function focusScrollingCells() {
  // A notebook cell wider than the column scrolls: focusable, so that a keyboard can scroll it, as
  // Material makes its own code blocks that scroll.
  for (const cell of document.querySelectorAll(".jupyter-wrapper .highlight-ipynb")) {
    if (cell.scrollWidth > cell.clientWidth) cell.tabIndex = 0;
    else cell.removeAttribute("tabindex");
  }
}

document$.subscribe(() => {
  // The search dialog, named as its field is ("Search", "搜索").
  const field = document.querySelector(".md-search__input");
  document.querySelector('.md-search[role="dialog"]')?.setAttribute("aria-label", field?.getAttribute("aria-label"));
  // The <nav> around each code block's copy button made one unnamed landmark per block: not a landmark.
  for (const nav of document.querySelectorAll("nav.md-code__nav")) nav.setAttribute("role", "none");
  // "Copied to clipboard" is shown in Material's dialog: announced as a status message.
  document.querySelector(".md-dialog__inner")?.setAttribute("role", "status");
  focusScrollingCells();
});
window.addEventListener("resize", focusScrollingCells);
