// Rebuilds every vendored front-end file from the pinned npm packages:
//   ../vendor/editor.js              the CodeMirror island (one minified IIFE)
//   ../vendor/editor.LICENSES.txt    licences of everything bundled into it
//   ../vendor/htmx.min.js (+ licence) copied from the htmx.org package
//   ../fonts/                        woff2 subsets, their licences and fonts.css
//
// `node build.mjs --check` builds into a temporary folder and fails when the
// committed files differ, so a stale bundle is caught without rewriting it.
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { copyFile, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.join(here, "node_modules");
const pkg = JSON.parse(await readFile(path.join(here, "package.json"), "utf8"));

// Latin and Latin Extended cover the book's prose; other scripts fall back to
// the system fonts named after these families in the CSS stacks.
const FONTS = [
  { pkg: "@fontsource-variable/source-serif-4", family: "Source Serif 4", dir: "source-serif-4",
    styles: ["normal", "italic"] },
  { pkg: "@fontsource-variable/inter", family: "Inter", dir: "inter", styles: ["normal"] },
  { pkg: "@fontsource-variable/jetbrains-mono", family: "JetBrains Mono", dir: "jetbrains-mono",
    styles: ["normal"] },
];
const FONT_SUBSETS = ["latin-ext", "latin"];

async function readPackage(name) {
  const dir = path.join(modules, name);
  const meta = JSON.parse(await readFile(path.join(dir, "package.json"), "utf8"));
  const files = await readdir(dir);
  const licenceFile = files.find((f) => /^licen[cs]e(\.md|\.txt)?$/i.test(f));
  const licence = licenceFile ? await readFile(path.join(dir, licenceFile), "utf8") : "";
  return { name, version: meta.version, license: meta.license, licence, dir };
}

// The package a bundled input belongs to, from its path under node_modules.
function packageOf(input) {
  const rest = input.split("node_modules/").pop();
  const parts = rest.split("/");
  return parts[0].startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0];
}

async function buildEditor(outDir) {
  const banner =
    `/* Kernel Playground editor island ${pkg.version}. Built by static/editor/build.mjs ` +
    "(see docs/frontend.md); licences of the bundled packages: editor.LICENSES.txt */";
  const result = await build({
    entryPoints: [path.join(here, "src/index.js")],
    outfile: path.join(outDir, "vendor/editor.js"),
    bundle: true,
    format: "iife",
    minify: true,
    target: ["es2020"],
    legalComments: "none",
    banner: { js: banner },
    define: { __KPLAY_EDITOR_VERSION__: JSON.stringify(pkg.version) },
    metafile: true,
    logLevel: "warning",
  });
  // Only packages that left code in the output, not those tree-shaken away.
  const [output] = Object.values(result.metafile.outputs);
  const names = new Set(
    Object.entries(output.inputs)
      .filter(([p, info]) => p.includes("node_modules/") && info.bytesInOutput > 0)
      .map(([p]) => packageOf(p)),
  );
  const bundled = await Promise.all([...names].sort().map(readPackage));
  const notice = bundled.map(
    (p) => `${"=".repeat(72)}\n${p.name} ${p.version} (${p.license})\n${"=".repeat(72)}\n\n` +
      `${p.licence.trim()}\n`,
  );
  const header = "Third-party packages bundled into editor.js, with their licences.\n\n";
  await writeFile(path.join(outDir, "vendor/editor.LICENSES.txt"), header + notice.join("\n"));
  return bundled;
}

async function copyHtmx(outDir) {
  const htmx = await readPackage("htmx.org");
  await copyFile(path.join(htmx.dir, "dist/htmx.min.js"), path.join(outDir, "vendor/htmx.min.js"));
  await writeFile(path.join(outDir, "vendor/htmx.LICENSE.txt"),
    `htmx.org ${htmx.version} (${htmx.license})\n\n${htmx.licence.trim()}\n`);
  return htmx;
}

function fontFace(font, style, subset, ranges) {
  const file = `${font.dir}/${font.dir}-${subset}-wght-${style}.woff2`;
  return [
    `/* ${font.family}, ${style}, ${subset} */`,
    "@font-face {",
    `  font-family: "${font.family}";`,
    `  font-style: ${style};`,
    "  font-weight: 100 900;",
    "  font-display: swap;",
    `  src: url("./${file}") format("woff2");`,
    `  unicode-range: ${ranges[subset]};`,
    "}",
  ].join("\n");
}

async function copyFonts(outDir) {
  const faces = [];
  const used = [];
  for (const font of FONTS) {
    const info = await readPackage(font.pkg);
    const ranges = JSON.parse(await readFile(path.join(info.dir, "unicode.json"), "utf8"));
    const target = path.join(outDir, "fonts", font.dir);
    await mkdir(target, { recursive: true });
    await writeFile(path.join(target, "LICENSE.txt"), `${info.licence.trim()}\n`);
    for (const style of font.styles) {
      for (const subset of FONT_SUBSETS) {
        const name = `${font.dir}-${subset}-wght-${style}.woff2`;
        await copyFile(path.join(info.dir, "files", name), path.join(target, name));
        faces.push(fontFace(font, style, subset, ranges));
      }
    }
    used.push(info);
  }
  const header = [
    "/* Self-hosted fonts for Kernel Playground, generated by static/editor/build.mjs.",
    ` * ${used.map((f) => `${f.name} ${f.version}`).join(", ")}; SIL Open Font`,
    " * Licence 1.1 (LICENSE.txt in each folder). Variable weight 100-900. */",
  ].join("\n");
  await writeFile(path.join(outDir, "fonts/fonts.css"), `${header}\n\n${faces.join("\n\n")}\n`);
  return used;
}

async function buildAll(outDir) {
  await mkdir(path.join(outDir, "vendor"), { recursive: true });
  await mkdir(path.join(outDir, "fonts"), { recursive: true });
  const bundled = await buildEditor(outDir);
  const htmx = await copyHtmx(outDir);
  const fonts = await copyFonts(outDir);
  return { bundled, htmx, fonts };
}

async function listFiles(root, sub = "") {
  const out = [];
  for (const entry of await readdir(path.join(root, sub), { withFileTypes: true })) {
    const rel = path.join(sub, entry.name);
    if (entry.isDirectory()) out.push(...(await listFiles(root, rel)));
    else out.push(rel);
  }
  return out;
}

async function digest(file) {
  try {
    return createHash("sha256").update(await readFile(file)).digest("hex");
  } catch {
    return "missing";
  }
}

async function check() {
  const scratch = await mkdtemp(path.join(tmpdir(), "kplay-static-"));
  try {
    await buildAll(scratch);
    const stale = [];
    for (const rel of await listFiles(scratch)) {
      const committed = path.join(here, "..", rel);
      if ((await digest(path.join(scratch, rel))) !== (await digest(committed))) stale.push(rel);
    }
    if (stale.length) {
      console.error(`stale vendored files (run npm run build): ${stale.join(", ")}`);
      process.exitCode = 1;
    } else {
      console.log("vendored files match the recipe");
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

async function main() {
  if (process.argv.includes("--check")) return check();
  const outDir = path.join(here, "..");
  const { bundled, htmx, fonts } = await buildAll(outDir);
  const size = (await readFile(path.join(outDir, "vendor/editor.js"))).length;
  console.log(`vendor/editor.js: ${(size / 1024).toFixed(1)} KiB, ${bundled.length} packages`);
  console.log(`vendor/htmx.min.js: htmx.org ${htmx.version}`);
  console.log(`fonts: ${fonts.map((f) => `${f.name} ${f.version}`).join(", ")}`);
}

await main();
