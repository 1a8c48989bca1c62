// Words for the commands the UI shows to copy into a terminal (liqoctl,
// kubectl): each value quoted only when the shell would read it otherwise.

/** A shell word: as is when plain, else single-quoted. */
export function shellWord(value) {
  const text = String(value ?? '');
  if (/^[A-Za-z0-9._:/=@%+,-]+$/.test(text)) return text;
  return `'${text.replace(/'/g, "'\\''")}'`;
}
