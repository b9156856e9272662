// The book's script on A.9.3 is read part by part: on a wide screen each part is open, on a phone
// each is a title to tap (tools/hooks/ddp_scripts.py marks them data-open-wide).
document$.subscribe(() => {
  if (!matchMedia("(min-width: 60em)").matches) return;
  for (const part of document.querySelectorAll("details[data-open-wide]")) part.open = true;
});
