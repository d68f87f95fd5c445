//! A browser user's actions: its page opened at the first, each action on it, what the page did
//! meanwhile (its DDP round trips recorded; a console error or a failed request failing the step,
//! the user going on; a crash or a dead browser failing the user), its timings at the end.

use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::Value;

use super::user::Vu;
use crate::realtime::Steps;
use crate::scenario::template::{self, Vars};
use crate::scenario::Step;
use crate::session::Stop;

impl<S: Steps> Vu<'_, S> {
    /// A browser action on the user's page (opened at the first), then what the page did
    /// meanwhile: its DDP round trips recorded, a console error or a failed request failing the
    /// step (the user goes on), a crash or a dead browser failing the user.
    pub(super) async fn browser(&mut self, step: &Step, a: &crate::scenario::Action) -> Result<(), Stop> {
        use crate::scenario::Action;
        let timeout = self.timeout(match a {
            Action::WaitForSelector(s) | Action::Expect(s) => s.timeout,
            _ => None,
        });
        if self.page.is_none() {
            let Some((port, path)) = &self.w.browser else {
                return Err(self.fail_with(step, "browser", "no browser was started for this run"));
            };
            match crate::browser::page::Page::open(*port, path).await {
                Ok(p) => {
                    let n = self.w.pages.open.fetch_add(1, Ordering::SeqCst) + 1;
                    self.w.pages.peak.fetch_max(n, Ordering::SeqCst);
                    self.page = Some(Box::new(p));
                }
                Err(f) => {
                    self.rec().browser.crashes += 1;
                    return Err(self.fail_with(step, f.class, &f.detail));
                }
            }
        }
        let text = |v: &Value, vars: &Vars| match template::render(v, vars) {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        };
        let render = |s: &str, vars: &Vars| text(&Value::String(s.to_string()), vars);
        let mut goto = String::new();
        if let Action::Goto(path) = a {
            let target = render(path, &self.vars);
            goto = url::Url::parse(&self.w.plan.targets[self.target].url)
                .and_then(|base| base.join(&target))
                .map_err(|e| self.fail_with(step, "scenario", &format!("goto {target:?}: {e}")))?
                .to_string();
            self.page_left().await;
            if let Some(p) = &mut self.page {
                p.shown_by = Some(step.name.clone());
            }
        }
        // The step's clock starts once its page is open and the last page's timings are read.
        let began = Instant::now();
        self.step_began = began;
        let vars = &self.vars;
        let Some(page) = self.page.as_mut() else { return Ok(()) };
        let out = match a {
            Action::Goto(_) => page.goto(&goto, timeout).await,
            Action::Click(sel) => page.click(&render(sel, vars), timeout).await,
            Action::Fill { selector, value } => page.fill(&render(selector, vars), &text(value, vars), timeout).await,
            Action::Press { selector, key } => page.press(&render(selector, vars), key, timeout).await,
            Action::WaitForSelector(s) | Action::Expect(s) => {
                let selector = render(&s.selector, vars);
                let wanted = s.text.as_ref().map(|t| text(t, vars));
                let want = crate::browser::page::Want {
                    selector: &selector,
                    count: s.count,
                    text: wanted.as_deref(),
                    state: s.state.name(),
                };
                page.wait_for(&want, timeout, matches!(a, Action::Expect(_))).await
            }
        };
        let happened = page.take();
        let mut trouble = None;
        {
            let mut r = self.rec();
            for (m, us) in &happened.methods {
                r.browser.method(m, *us);
            }
            for (s, us) in &happened.subs {
                r.browser.sub(s, *us);
            }
            r.browser.console_errors += happened.console_errors.count;
            r.browser.failed_requests += happened.failed_requests.count;
            r.browser.dialogs += happened.dialogs.count;
            if let Some(e) = happened.console_errors.first.first() {
                trouble = Some(("console", format!("the page logged an error: {e}")));
            } else if let Some(e) = happened.failed_requests.first.first() {
                trouble = Some(("request", format!("a request of the page failed: {e}")));
            }
        }
        match out {
            Err(f) => {
                if matches!(f.class, "browser" | "crash") {
                    self.rec().browser.crashes += 1;
                    // A dead page is closed now: nothing more is read from it.
                    if let Some(p) = self.page.take() {
                        self.w.pages.open.fetch_sub(1, Ordering::SeqCst);
                        drop(p);
                    }
                }
                Err(self.fail_with(step, f.class, &f.detail))
            }
            Ok(()) => {
                match trouble {
                    // The step counts as failed; the user goes on, as a person would.
                    Some((class, detail)) => {
                        let _ = self.fail_with(step, class, &detail);
                    }
                    None => self.ok(step, began.elapsed()),
                }
                Ok(())
            }
        }
    }

    /// The page's timings of the navigation it shows, recorded under the step that made it.
    async fn page_left(&mut self) {
        let Some(page) = self.page.as_mut() else { return };
        let Some(step) = page.shown_by.clone() else { return };
        if let Some(v) = page.vitals().await {
            self.rec().browser.vitals(&step, [v.ttfb_ms, v.fcp_ms, v.lcp_ms, v.cls, v.inp_ms]);
        }
    }

    /// A browser user's end: the last page's timings, then its context closed.
    pub(super) async fn leave(&mut self, page: Box<crate::browser::page::Page>) {
        self.page = Some(page);
        self.page_left().await;
        if let Some(p) = self.page.take() {
            self.w.pages.open.fetch_sub(1, Ordering::SeqCst);
            p.close().await;
        }
    }
}
