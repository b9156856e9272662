// Let long identifiers in tables (torch.multiprocessing.spawn) wrap after a dot, an underscore or a slash
// instead of in the middle of a word. Runs on every page, instant navigation included.
document$.subscribe(() => {
  for (const code of document.querySelectorAll(".md-typeset table code")) {
    if (code.childElementCount || !/[._/]\w/.test(code.textContent)) continue;
    const parts = code.textContent.split(/(?<=[._/])(?=\w)/);
    code.replaceChildren(...parts.flatMap((part, i) => i ? [document.createElement("wbr"), part] : [part]));
  }
});
