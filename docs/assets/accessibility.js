// What Material's chrome leaves out for screen readers, set on every page, instant navigation included
// (docs/assets/extra.css has the colours and the focus ring).
document$.subscribe(() => {
  // The search dialog, named as its field is ("Search", "搜索").
  const field = document.querySelector(".md-search__input");
  if (field) document.querySelector('.md-search[role="dialog"]')?.setAttribute("aria-label", field.ariaLabel);
  // The <nav> around each code block's copy button made one unnamed landmark per block: not a landmark.
  for (const nav of document.querySelectorAll("nav.md-code__nav")) nav.setAttribute("role", "none");
  // "Copied to clipboard" is shown in Material's dialog: announced as a status message.
  document.querySelector(".md-dialog__inner")?.setAttribute("role", "status");
});
