// Drives the web view of `cadre ui` in Debian's headless chromium with
// puppeteer-core (installed by scripts/test-deps-browser into .ci/browser),
// for tests/suite/ui.rs. Talks to the test in lines: it prints
// `RUNNING <rows>` once the page shows the session's tree with the
// background child running, waits for a line on stdin (the test then lets
// the child end), prints `COMPLETED <rows>` when the page shows it ended,
// then checks the transcript view and a request without the token, and
// prints `DONE`. Any failure prints `FAIL <why>` and exits 1.
//
// In `fleet` mode it watches the fleet's table instead: `FLEET_RUNNING
// <rows>` once a task is drawn running with the worker holding its lease
// and the lease's age, then (after a line on stdin) `FLEET_COMPLETED
// <rows>` once it is drawn ended, then `DONE`.
//
// Usage: node ui_browser.cjs URL [tree|fleet]   (CADRE_BROWSER_MODULES: a node_modules
// holding puppeteer-core; CADRE_CHROMIUM: the browser; CADRE_UI_SCREENSHOT:
// a PNG path to save the page to once the child ended.)
"use strict";
const path = require("path");
const readline = require("readline");
const puppeteer = require(path.join(process.env.CADRE_BROWSER_MODULES, "puppeteer-core"));

const url = process.argv[2];
const mode = process.argv[3] || "tree";
const WAIT = { timeout: 30000, polling: 50 };
const say = (line) => process.stdout.write(line + "\n");
const lines = readline.createInterface({ input: process.stdin });
const nextLine = () => new Promise((resolve) => lines.once("line", resolve));

// What the tree shows, row by row.
const rows = () =>
  [...document.querySelectorAll("tr.agent")].map((tr) => ({
    agent: tr.dataset.agent,
    status: tr.dataset.status,
    text: [...tr.cells].map((c) => c.textContent.trim()),
  }));

// What the fleet's table shows, row by row.
const fleetRows = () =>
  [...document.querySelectorAll("#fleet-tasks tr")].map((tr) => ({
    task: tr.dataset.task,
    status: tr.dataset.status,
    text: [...tr.cells].map((c) => c.textContent.trim()),
  }));

async function watchFleet(page) {
  await page.waitForFunction(
    () => !document.querySelector("#fleet").hidden &&
      [...document.querySelectorAll('#fleet-tasks tr[data-status="running"]')].some(
        (tr) => tr.cells[2].textContent !== "–" && / s$/.test(tr.cells[3].textContent)),
    WAIT);
  say("FLEET_RUNNING " + JSON.stringify(await page.evaluate(fleetRows)));
  await nextLine();
  await page.waitForFunction(
    () => document.querySelector('#fleet-tasks tr[data-status="completed"]') !== null, WAIT);
  say("FLEET_COMPLETED " + JSON.stringify(await page.evaluate(fleetRows)));
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: process.env.CADRE_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    pipe: true,
    // Root in a container has no user namespaces for chromium's sandbox.
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1280,720"],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 720 });
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    const first = await page.goto(url);
    if (first.status() !== 200) throw new Error(`page answered ${first.status()}`);
    if (mode === "fleet") {
      await watchFleet(page);
      if (errors.length) throw new Error("errors on the page: " + errors.join("; "));
      say("DONE");
      return;
    }

    // The tree: the main agent and the background child calling Bash.
    await page.waitForFunction(
      () => [...document.querySelectorAll('tr.agent[data-status="running"]')].some(
        (tr) => tr.dataset.agent !== "main" && tr.cells[2].textContent.includes("Bash")),
      WAIT);
    const running = await page.evaluate(rows);
    if (process.env.CADRE_UI_SCREENSHOT) {
      // The picture of docs/observability.md: the child's transcript open.
      await page.click('tr.agent:not([data-agent="main"])');
      await page.waitForFunction(
        () => document.querySelector("#messages")?.textContent.includes("release"), WAIT);
      await page.screenshot({ path: process.env.CADRE_UI_SCREENSHOT });
    }
    say("RUNNING " + JSON.stringify(running));
    await nextLine();

    // Live: the child ends and the page shows it without a reload.
    await page.waitForFunction(
      () => [...document.querySelectorAll("tr.agent")].some(
        (tr) => tr.dataset.agent !== "main" && tr.dataset.status === "completed"),
      WAIT);
    await page.waitForFunction(
      () => document.querySelector('tr.agent[data-agent="main"]')?.dataset.status === "ended",
      WAIT);
    say("COMPLETED " + JSON.stringify(await page.evaluate(rows)));

    // One click away: the child's transcript, with its Bash call.
    await page.click('tr.agent:not([data-agent="main"])');
    await page.waitForFunction(
      () => document.querySelector("#messages")?.textContent.includes("release"),
      WAIT);
    say("TRANSCRIPT " + JSON.stringify(await page.$eval("#messages", (e) => e.textContent.slice(0, 400))));

    if (errors.length) throw new Error("errors on the page: " + errors.join("; "));

    // Without the token: refused, for the page and for its data.
    const bare = new URL(url);
    bare.search = "";
    const noToken = await page.evaluate(async (u) => (await fetch(u + "api/sessions")).status, bare.href);
    const wrong = await page.evaluate(async (u) => (await fetch(u + "api/sessions?token=0")).status, bare.href);
    const pageNoToken = await (await browser.newPage()).goto(bare.href);
    say("REFUSED " + JSON.stringify({ noToken, wrong, page: pageNoToken.status() }));
    say("DONE");
  } finally {
    await browser.close();
  }
})().then(
  () => process.exit(0),
  (e) => { say("FAIL " + String(e && e.stack || e).replace(/\n/g, " | ")); process.exit(1); });
