// The editor island: one CodeMirror 6 view per kernel cell, exposed to the
// page as window.KPlayEditor.create(parentEl, options). The page never sees
// CodeMirror itself; everything goes through the small object returned here.
import { Annotation, Compartment, EditorState, Prec } from "@codemirror/state";
import {
  EditorView,
  drawSelection,
  dropCursor,
  highlightActiveLine,
  highlightActiveLineGutter,
  highlightSpecialChars,
  keymap,
  lineNumbers,
} from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { bracketMatching, indentOnInput, indentUnit } from "@codemirror/language";
import { closeBrackets, closeBracketsKeymap } from "@codemirror/autocomplete";
import { lintGutter, lintKeymap } from "@codemirror/lint";
import { cpp } from "@codemirror/lang-cpp";
import { python } from "@codemirror/lang-python";

import { themeExtension } from "./themes.js";
import { clearMarks, lineMarkExtension, markLines } from "./marks.js";

const LANGUAGES = {
  cpp: { support: cpp, label: "CUDA C++ kernel source", indent: "    " },
  python: { support: python, label: "Python kernel source", indent: "    " },
};

// Marks a transaction as coming from setDoc, so onChange reports only what
// the reader typed.
const programmatic = Annotation.define();

function languageOf(name) {
  return Object.hasOwn(LANGUAGES, name) ? name : "cpp";
}

function languageExtension(name, label) {
  const lang = LANGUAGES[name];
  return [
    lang.support(),
    indentUnit.of(lang.indent),
    EditorView.contentAttributes.of({ "aria-label": label || lang.label }),
  ];
}

function baseExtensions(options) {
  const runKeymap = Prec.highest(
    keymap.of([
      {
        key: "Mod-Enter",
        preventDefault: true,
        run: () => {
          options.onRun();
          return true;
        },
      },
    ]),
  );
  return [
    runKeymap,
    lineNumbers(),
    lintGutter({ hoverTime: 150 }),
    highlightActiveLineGutter(),
    highlightSpecialChars(),
    history(),
    drawSelection(),
    dropCursor(),
    EditorState.allowMultipleSelections.of(true),
    indentOnInput(),
    bracketMatching(),
    closeBrackets(),
    highlightActiveLine(),
    lineMarkExtension,
    // CodeMirror owns the root's class list; this is how a class survives updates.
    EditorView.editorAttributes.of({ class: "kplay-editor" }),
    // Tab indents; Escape then Tab (or Ctrl-m / Shift-Alt-m) leaves the editor.
    keymap.of([
      ...closeBracketsKeymap,
      ...defaultKeymap,
      ...historyKeymap,
      ...lintKeymap,
      indentWithTab,
    ]),
    EditorView.updateListener.of((update) => {
      if (!update.docChanged) return;
      if (update.transactions.some((tr) => tr.annotation(programmatic))) return;
      options.onChange(update.state.doc.toString());
    }),
  ];
}

function normaliseOptions(options) {
  const opts = options || {};
  return {
    doc: typeof opts.doc === "string" ? opts.doc : "",
    language: languageOf(opts.language),
    dark: Boolean(opts.dark),
    label: typeof opts.label === "string" ? opts.label : "",
    onRun: typeof opts.onRun === "function" ? opts.onRun : () => {},
    onChange: typeof opts.onChange === "function" ? opts.onChange : () => {},
    // The page's Content-Security-Policy nonce: CodeMirror's <style> element carries it.
    nonce: typeof opts.nonce === "string" ? opts.nonce : "",
  };
}

function create(parentEl, options) {
  if (!(parentEl instanceof Element)) throw new TypeError("KPlayEditor.create needs an element");
  const opts = normaliseOptions(options);
  const languageSlot = new Compartment();
  const themeSlot = new Compartment();
  let language = opts.language;

  const view = new EditorView({
    parent: parentEl,
    state: EditorState.create({
      doc: opts.doc,
      extensions: [
        baseExtensions(opts),
        languageSlot.of(languageExtension(language, opts.label)),
        themeSlot.of(themeExtension(opts.dark)),
        opts.nonce ? EditorView.cspNonce.of(opts.nonce) : [],
      ],
    }),
  });

  return {
    view,
    getDoc: () => view.state.doc.toString(),
    setDoc(text) {
      // Old marks point at lines of the old text; drop them first.
      clearMarks(view);
      view.dispatch({
        changes: { from: 0, to: view.state.doc.length, insert: String(text ?? "") },
        annotations: programmatic.of(true),
      });
    },
    setLanguage(lang) {
      language = languageOf(lang);
      view.dispatch({
        effects: languageSlot.reconfigure(languageExtension(language, opts.label)),
      });
    },
    getLanguage: () => language,
    markLines: (marks) => markLines(view, marks),
    clearMarks: () => clearMarks(view),
    setDark(dark) {
      view.dispatch({ effects: themeSlot.reconfigure(themeExtension(Boolean(dark))) });
    },
    focus: () => view.focus(),
    destroy: () => view.destroy(),
  };
}

// __KPLAY_EDITOR_VERSION__ is replaced at build time (build.mjs, from package.json).
window.KPlayEditor = Object.freeze({ create, version: __KPLAY_EDITOR_VERSION__ });
