package httpapi

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
)

//go:embed templates/login.html
var loginFS embed.FS

// The browser login of the admin routes (served only with an admin token
// configured; without one the admin routes answer loopback clients).
const (
	loginPath  = "/dashboard/login"
	logoutPath = "/dashboard/logout"
)

// PageSecurityHeaders are sent with the login page and the dashboard: no
// script, no external resource, no framing (the logout button cannot be
// clicked through another site's frame), forms only to this server.
func PageSecurityHeaders(c *gin.Context) {
	c.Header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	c.Header("X-Frame-Options", "DENY")
	c.Header("Referrer-Policy", "same-origin")
	c.Header("Cache-Control", "no-store")
}

// loginView is what templates/login.html shows.
type loginView struct {
	// Problem says why the last attempt failed; empty on a first visit.
	Problem string
	// Lasts is AdminSessionTTL in words.
	Lasts string
	// Next is the dashboard URL (path and query) to return to once logged
	// in; empty for the dashboard itself.
	Next string
}

func parseLoginTemplate() (*template.Template, error) {
	t, err := template.New("login.html").ParseFS(loginFS, "templates/login.html")
	if err != nil {
		return nil, fmt.Errorf("httpapi: login template: %w", err)
	}
	return t, nil
}

// isFormRoute reports whether route takes an HTML form body rather than
// JSON: the login and logout forms (application/x-www-form-urlencoded) and
// the console's forms (Route.Form: the what-if page's, multipart/form-data
// for its file), which a page without script can only send that way. All
// refuse requests from other sites (CrossSiteProblem), which is what
// requireJSON's rule protects against.
func (h *handler) isFormRoute(route string) bool {
	return route == loginPath || route == logoutPath || h.console.forms[route]
}

// registerLogin adds the login page, the login and the logout.
func (h *handler) registerLogin(r *gin.Engine) {
	r.GET(loginPath, func(c *gin.Context) { h.loginPage(c, http.StatusOK, "", c.Query("next")) })
	r.POST(loginPath, h.authThrottle, h.login)
	r.POST(logoutPath, h.logout)
}

// loginPage answers the login form with status, saying problem; the form
// returns to next (dashboardURL) once logged in.
func (h *handler) loginPage(c *gin.Context, status int, problem, next string) {
	var buf bytes.Buffer
	view := loginView{Problem: problem, Lasts: fmt.Sprintf("%g hours", AdminSessionTTL.Hours()), Next: h.dashboardURL(next)}
	if err := h.loginTmpl.Execute(&buf, view); err != nil {
		WriteError(c, h.log, fmt.Errorf("render login: %w", err), "")
		return
	}
	PageSecurityHeaders(c)
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
	c.Abort()
}

// formProblem refuses a form request from another site (401) or without a
// form body (415); it reports whether it answered.
func (h *handler) formProblem(c *gin.Context) bool {
	if reason := CrossSiteProblem(c.Request); reason != "" {
		h.logAdminAuthFailure(c, "cross-site form: "+reason)
		WriteError(c, h.log, apperr.New(apperr.Unauthorized, "the form must be sent from this server's own page (%s)", reason), "")
		return true
	}
	if mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		WriteError(c, h.log, apperr.New(apperr.UnsupportedMediaType, "send the form as application/x-www-form-urlencoded").
			WithDetails(map[string]any{"accept": "application/x-www-form-urlencoded"}), "")
		return true
	}
	return false
}

// login answers POST /dashboard/login (form fields token and next): with
// the admin token, a new session cookie and 303 to next when it is a
// dashboard URL (dashboardURL), else to the dashboard; otherwise the form
// again, 401, and a rate-limited warning that never holds the token.
func (h *handler) login(c *gin.Context) {
	if h.formProblem(c) {
		return
	}
	token := c.PostForm("token") // the body only; a token in the URL is not read
	if token == "" || !equalSecret(token, h.opts.AdminToken) {
		reason := "wrong token in the login form"
		if token == "" {
			reason = "no token in the login form"
		}
		h.logAdminAuthFailure(c, reason)
		if token != "" {
			h.opts.AuthGuard.Failed(c.Request.RemoteAddr, "login")
		}
		h.loginPage(c, http.StatusUnauthorized, "That is not the admin token.", c.PostForm("next"))
		return
	}
	id, _, err := h.sessions.create()
	if err != nil {
		WriteError(c, h.log, fmt.Errorf("admin session: %w", err), "")
		return
	}
	http.SetCookie(c.Writer, sessionCookie(c.Request, id, int(AdminSessionTTL.Seconds())))
	c.Header("Cache-Control", "no-store")
	to := h.dashboardURL(c.PostForm("next"))
	if to == "" {
		to = "/dashboard"
	}
	c.Redirect(http.StatusSeeOther, to)
}

// isDashboardPage reports whether route is a page of the dashboard
// (Route.Page), which a browser without a session is asked to log in for.
func (h *handler) isDashboardPage(route string) bool { return h.console.pages[route] }

// dashboardURL returns next when it is a URL of this server's dashboard
// (a path isDashboardPage, any query), as path and query; else "". Nothing
// else is followed after a login: not another site, not another route.
func (h *handler) dashboardURL(next string) string {
	if next == "" || strings.ContainsAny(next, "\\\r\n") {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || u.User != nil || !h.isDashboardPage(u.Path) || !strings.HasPrefix(next, "/dashboard") {
		return ""
	}
	if u.RawQuery == "" {
		return u.Path
	}
	return u.Path + "?" + u.RawQuery
}

// logout answers POST /dashboard/logout (form field csrf): it ends the
// session, deletes the cookie and sends the browser to the login form. A
// live session needs its CSRF token; without one there is nothing to end.
func (h *handler) logout(c *gin.Context) {
	if h.formProblem(c) {
		return
	}
	if id, err := c.Cookie(adminSessionCookie); err == nil {
		if sess := h.sessions.get(id); sess != nil {
			if !equalSecret(c.PostForm(csrfField), sess.csrf) {
				h.logAdminAuthFailure(c, "logout without the session's CSRF token")
				WriteError(c, h.log, apperr.New(apperr.Unauthorized, "the logout form must carry the session's CSRF token"), "")
				return
			}
			h.sessions.end(id)
		}
	}
	http.SetCookie(c.Writer, sessionCookie(c.Request, "", -1))
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusSeeOther, loginPath)
}

// adminAuth guards the admin routes. A request with an Authorization
// header, and every request when no admin token is configured, is decided
// by requireAdmin as before (bearer token; loopback only without one).
// Otherwise a live session cookie lets it in; one that changes state must
// also come from this server's pages and carry the session's CSRF token.
// A browser asking for the dashboard without a session gets the login form
// (401).
func (h *handler) adminAuth(c *gin.Context) {
	if h.opts.AdminToken == "" || c.GetHeader("Authorization") != "" {
		h.requireAdmin(c)
		return
	}
	id, _ := c.Cookie(adminSessionCookie)
	sess := h.sessions.get(id)
	if sess == nil {
		if id != "" {
			http.SetCookie(c.Writer, sessionCookie(c.Request, "", -1))
		}
		if c.Request.Method == http.MethodGet && h.isDashboardPage(c.FullPath()) && acceptsHTML(c.Request) {
			h.logAdminAuthFailure(c, "no admin session: login form shown")
			c.Header("WWW-Authenticate", `Bearer realm="payserver-admin"`)
			h.loginPage(c, http.StatusUnauthorized, "", c.Request.URL.RequestURI())
			return
		}
		h.requireAdmin(c)
		return
	}
	if changesState(c.Request.Method) {
		reason := CrossSiteProblem(c.Request)
		csrf := c.GetHeader(CSRFHeader)
		if csrf == "" && h.isFormRoute(c.FullPath()) {
			csrf = c.PostForm(csrfField) // a form cannot send a header
		}
		if reason == "" && !equalSecret(csrf, sess.csrf) {
			reason = "no valid " + CSRFHeader + " (or form field " + csrfField + ")"
		}
		if reason != "" {
			h.logAdminAuthFailure(c, "session request refused: "+reason)
			WriteError(c, h.log, apperr.New(apperr.Unauthorized,
				"a state-changing request authenticated by the session cookie must come from this server's pages and carry %s", CSRFHeader), "")
			return
		}
	}
	c.Set(sessionKey, sess)
}

// acceptsHTML reports whether the request is a browser's asking for a page.
func acceptsHTML(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "text/html") {
			return true
		}
	}
	return false
}

// sessionOf returns the request's session, or nil when it was let in
// otherwise (bearer token, loopback).
func sessionOf(c *gin.Context) *adminSession {
	v, _ := c.Get(sessionKey)
	s, _ := v.(*adminSession)
	return s
}
