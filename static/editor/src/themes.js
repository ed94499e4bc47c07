// Editor chrome and syntax colours for the light and the dark theme.
//
// The chrome (background, gutters, cursor, selection) follows the page's CSS
// variables so a kernel cell looks like part of the chapter in either theme;
// only the syntax palette is fixed per theme, chosen for contrast against the
// page's own backgrounds.
import { EditorView } from "@codemirror/view";
import { HighlightStyle, syntaxHighlighting } from "@codemirror/language";
import { tags as t } from "@lezer/highlight";

const chrome = {
  "&": {
    color: "var(--fg)",
    backgroundColor: "var(--bg-soft)",
    fontSize: "0.9rem",
  },
  ".cm-scroller": {
    fontFamily: "var(--font-mono)",
    lineHeight: "1.55",
  },
  ".cm-content": { caretColor: "var(--accent)", padding: "0.6rem 0" },
  ".cm-cursor, .cm-dropCursor": { borderLeftColor: "var(--accent)", borderLeftWidth: "2px" },
  ".cm-gutters": {
    backgroundColor: "var(--bg-soft)",
    color: "var(--fg-muted)",
    border: "none",
    borderRight: "1px solid var(--border)",
  },
  ".cm-activeLineGutter": { backgroundColor: "transparent", color: "var(--fg)" },
  ".cm-lineNumbers .cm-gutterElement": { padding: "0 0.6rem 0 0.9rem" },
  ".cm-tooltip": {
    backgroundColor: "var(--bg)",
    color: "var(--fg)",
    border: "1px solid var(--border)",
    borderRadius: "4px",
  },
};

const SELECTION = [
  "&.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground",
  ".cm-selectionBackground",
  ".cm-content ::selection",
].join(", ");

function chromeTheme(dark) {
  const selection = dark
    ? "color-mix(in srgb, var(--accent) 35%, transparent)"
    : "color-mix(in srgb, var(--accent) 22%, transparent)";
  return EditorView.theme(
    {
      ...chrome,
      [SELECTION]: { backgroundColor: selection },
      ".cm-matchingBracket": {
        backgroundColor: "color-mix(in srgb, var(--ok) 25%, transparent)",
        outline: "1px solid color-mix(in srgb, var(--ok) 60%, transparent)",
      },
      ".cm-nonmatchingBracket": {
        backgroundColor: "color-mix(in srgb, var(--bad) 25%, transparent)",
      },
    },
    { dark },
  );
}

// One token-to-role mapping, two palettes. Plain identifiers keep the text
// colour: red-ish names would be confused with the compiler's error marks.
function palette(c) {
  return HighlightStyle.define([
    { tag: [t.keyword, t.controlKeyword, t.moduleKeyword, t.operatorKeyword], color: c.keyword },
    { tag: [t.definitionKeyword, t.modifier], color: c.keyword },
    { tag: [t.typeName, t.className, t.namespace, t.standard(t.typeName)], color: c.type },
    { tag: [t.function(t.variableName), t.function(t.propertyName)], color: c.func },
    { tag: t.definition(t.function(t.variableName)), color: c.func, fontWeight: "600" },
    { tag: [t.propertyName, t.attributeName], color: c.property },
    { tag: [t.string, t.special(t.string), t.character], color: c.string },
    { tag: [t.number, t.bool, t.null, t.atom], color: c.number },
    { tag: [t.processingInstruction, t.meta, t.macroName], color: c.meta },
    { tag: [t.comment, t.lineComment, t.blockComment], color: c.comment, fontStyle: "italic" },
    { tag: [t.operator, t.punctuation, t.bracket], color: c.punct },
    { tag: t.self, color: c.keyword, fontStyle: "italic" },
    { tag: t.invalid, color: c.invalid },
  ]);
}

// Each colour keeps at least 4.5:1 contrast on its theme's soft background.
const lightHighlightStyle = palette({
  keyword: "#8a2a8f", type: "#0b6e79", func: "#1f55b8", property: "#2e4d7a",
  string: "#2d7330", number: "#a04a00", meta: "#7a5a00", comment: "#686868",
  punct: "#3d3d3d", invalid: "#b3261e",
});

const darkHighlightStyle = palette({
  keyword: "#d39cf2", type: "#6ccbd6", func: "#8db4ff", property: "#b2c8e6",
  string: "#a9d38c", number: "#f2ab7c", meta: "#e3c27e", comment: "#8f959f",
  punct: "#c3c6cc", invalid: "#ff7b70",
});

export function themeExtension(dark) {
  return [
    chromeTheme(dark),
    syntaxHighlighting(dark ? darkHighlightStyle : lightHighlightStyle),
  ];
}
