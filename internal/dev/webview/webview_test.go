package webview

import (
	"errors"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

const host = "127.0.0.1:3000"

func quietOptions() Options {
	return Options{Stage: "local", Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return t0 }}
}

// do serves one request addressed to the loopback host.
func do(t *testing.T, h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	if req.Host == "example.com" {
		req.Host = host
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func get(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := do(t, h, httptest.NewRequest(http.MethodGet, target, nil))
	return rec.Code, rec.Body.String()
}

// payload is an HTML injection attempt naming the field it was put in.
func payload(field string) string { return `<script>alert("` + field + `")</script>&'` }

// poison sets every string field of *v to payload(TypeName.FieldName).
func poison(v any) {
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		if f := rv.Field(i); f.Kind() == reflect.String {
			f.SetString(payload(rv.Type().Name() + "." + rv.Type().Field(i).Name))
		}
	}
}

// stringFields lists the string fields of v's type as TypeName.FieldName.
func stringFields(v any) []string {
	rt := reflect.TypeOf(v)
	var out []string
	for i := range rt.NumField() {
		if rt.Field(i).Type.Kind() == reflect.String {
			out = append(out, rt.Name()+"."+rt.Field(i).Name)
		}
	}
	return out
}

func TestPageEscapesEveryField(t *testing.T) {
	var j Job
	var m Mail
	var dl, dlNoJob DeadLetter
	var sw, unknown Switch
	var sc Schedule
	for _, v := range []any{&j, &m, &dl, &dlNoJob, &sw, &unknown, &sc} {
		poison(v)
	}
	dlNoJob.JobID = "" // the ID is shown where there is no job id
	sw.HasStored, sw.Readable = true, true
	unknown.Unknown, unknown.HasStored = true, true
	src := Sources{
		Jobs:        &fakeJobs{rows: []Job{j}},
		Mail:        &fakeMail{rows: []Mail{m}},
		DeadLetters: &fakeLetters{rows: []DeadLetter{dl, dlNoJob}},
		Switches:    &fakeSwitches{rows: []Switch{sw, unknown}},
		Schedules:   fakeSchedules{sc},
		Job:         fakeJobReader{j.ID: j},
	}
	h := New(src, quietOptions())
	code, body := get(t, h, "/_local/")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	// The job's own page shows what the list leaves out.
	code, page := get(t, h, "/_local/jobs/"+url.PathEscape(j.ID))
	if code != http.StatusOK {
		t.Fatalf("job page: status %d: %s", code, page)
	}
	body += page
	if strings.Contains(body, "<script") {
		t.Fatalf("a field was rendered unescaped:\n%s", body)
	}
	var fields []string
	for _, v := range []any{Job{}, Mail{}, DeadLetter{}, Switch{}, Schedule{}} {
		fields = append(fields, stringFields(v)...)
	}
	for _, f := range fields {
		if want := html.EscapeString(payload(f)); !strings.Contains(body, want) {
			t.Errorf("field %s not shown escaped (want %s)", f, want)
		}
	}
}

func TestPageEscapesSourceErrorsAndUnsafeLinks(t *testing.T) {
	src := Sources{
		Jobs:        &fakeJobs{err: errors.New(payload("jobs error"))},
		Mail:        &fakeMail{rows: []Mail{{To: "a@example.com", Link: "javascript:alert(1)"}}},
		DeadLetters: &fakeLetters{err: errors.New(payload("letters error"))},
		Switches:    &fakeSwitches{listErr: errors.New(payload("switches error"))},
	}
	code, body := get(t, New(src, quietOptions()), "/_local/")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	for _, what := range []string{"jobs error", "letters error", "switches error"} {
		if !strings.Contains(body, "cannot read: "+html.EscapeString(payload(what))) {
			t.Errorf("the %s is not shown escaped", what)
		}
	}
	if strings.Contains(body, `href="javascript:`) || !strings.Contains(body, `href="#ZgotmplZ"`) {
		t.Errorf("a javascript: link was not neutralized:\n%s", body)
	}
}

func TestPageSections(t *testing.T) {
	jobs := make([]Job, 5)
	for i := range jobs {
		jobs[i] = Job{ID: "job-" + string(rune('a'+i)), State: "Succeeded", CreatedAt: t0.Add(-time.Duration(i) * time.Minute)}
	}
	jobs[4].State = "Failed"
	opts := quietOptions()
	opts.Limit = 3
	h := New(Sources{Jobs: &fakeJobs{rows: jobs}, Switches: &fakeSwitches{rows: []Switch{{Type: "email.welcome.v1", Default: true, Effective: true}}}}, opts)

	_, body := get(t, h, "/_local/")
	for _, want := range []string{
		`data-job="job-a"`, `data-job="job-c"`, "Succeeded 3", "1m ago",
		`<meta http-equiv="refresh" content="5">`,
		"not wired in this stack", // mail and dead letters
		`<input type="hidden" name="state" value="off">`, "turn off",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, `data-job="job-d"`) || strings.Contains(body, "Failed") {
		t.Errorf("the limit of 3 rows was not applied")
	}
	if strings.Contains(body, `name="refresh"`) {
		t.Errorf("forms carry refresh=0 while the reload is on")
	}

	_, body = get(t, h, "/_local/?refresh=0")
	if strings.Contains(body, `http-equiv="refresh"`) || !strings.Contains(body, `<input type="hidden" name="refresh" value="0">`) {
		t.Errorf("?refresh=0: reload not off, or the forms do not keep it off")
	}

	_, body = get(t, New(Sources{Jobs: &fakeJobs{}}, quietOptions()), "/_local/")
	if !strings.Contains(body, "none yet") {
		t.Errorf("an empty section does not say so")
	}
}

func TestRoutes(t *testing.T) {
	h := New(Sources{}, quietOptions())
	tests := []struct {
		method, target string
		want           int
		contentType    string
	}{
		{http.MethodGet, "/_local/", http.StatusOK, "text/html; charset=utf-8"},
		{http.MethodGet, "/_local/assets/style.css", http.StatusOK, "text/css; charset=utf-8"},
		{http.MethodGet, "/_local/switches", http.StatusMethodNotAllowed, ""},
		{http.MethodGet, "/_local/nope", http.StatusNotFound, ""},
		{http.MethodPost, "/_local/switches", http.StatusNotFound, ""}, // no switchboard wired
	}
	for _, tt := range tests {
		rec := do(t, h, httptest.NewRequest(tt.method, tt.target, nil))
		if rec.Code != tt.want {
			t.Errorf("%s %s: %d; want %d", tt.method, tt.target, rec.Code, tt.want)
		}
		if tt.contentType != "" && rec.Header().Get("Content-Type") != tt.contentType {
			t.Errorf("%s %s: Content-Type %q", tt.method, tt.target, rec.Header().Get("Content-Type"))
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s %s: CSP %q", tt.method, tt.target, csp)
		}
	}
}

func TestPrefixOption(t *testing.T) {
	opts := quietOptions()
	opts.Prefix = "/ops"
	h := New(Sources{Switches: &fakeSwitches{rows: []Switch{{Type: "t.v1"}}}}, opts)
	code, body := get(t, h, "/ops/")
	if code != http.StatusOK || !strings.Contains(body, `action="/ops/switches"`) || !strings.Contains(body, `href="/ops/assets/style.css"`) {
		t.Fatalf("status %d, page does not use the prefix:\n%s", code, body)
	}
}

func TestFlip(t *testing.T) {
	welcome := Switch{Type: "email.welcome.v1", Default: true, Effective: true}
	digest := Switch{Type: "email.partner-digest.v1"}
	typo := Switch{Type: "email.welcom.v1", Stored: "on", HasStored: true, Unknown: true}
	form := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	tests := []struct {
		name     string
		form     url.Values
		host     string
		headers  map[string]string
		listErr  error
		setErr   error
		want     int
		location string
		sets     []setCall
	}{
		{name: "off", form: form("type", welcome.Type, "state", "off"),
			want: http.StatusSeeOther, location: "/_local/#switches", sets: []setCall{{welcome.Type, false}}},
		{name: "on, reload kept off", form: form("type", digest.Type, "state", "on", "refresh", "0"),
			want: http.StatusSeeOther, location: "/_local/?refresh=0#switches", sets: []setCall{{digest.Type, true}}},
		{name: "same origin", form: form("type", digest.Type, "state", "on"),
			headers: map[string]string{"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"},
			want:    http.StatusSeeOther, location: "/_local/#switches", sets: []setCall{{digest.Type, true}}},
		{name: "localhost", form: form("type", digest.Type, "state", "on"), host: "localhost:3000",
			headers: map[string]string{"Origin": "http://localhost:3000"},
			want:    http.StatusSeeOther, location: "/_local/#switches", sets: []setCall{{digest.Type, true}}},
		{name: "unknown type", form: form("type", "email.nope.v1", "state", "off"), want: http.StatusBadRequest},
		{name: "typo parameter", form: form("type", typo.Type, "state", "off"), want: http.StatusBadRequest},
		{name: "no type", form: form("state", "off"), want: http.StatusBadRequest},
		{name: "bad state", form: form("type", welcome.Type, "state", "maybe"), want: http.StatusBadRequest},
		{name: "cross-origin", form: form("type", welcome.Type, "state", "off"),
			headers: map[string]string{"Origin": "http://evil.example"}, want: http.StatusForbidden},
		{name: "cross-site fetch", form: form("type", welcome.Type, "state", "off"),
			headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: http.StatusForbidden},
		{name: "other port", form: form("type", welcome.Type, "state", "off"),
			headers: map[string]string{"Origin": "http://127.0.0.1:8080"}, want: http.StatusForbidden},
		{name: "rebound host", form: form("type", welcome.Type, "state", "off"), host: "evil.example:3000",
			headers: map[string]string{"Origin": "http://evil.example:3000"}, want: http.StatusForbidden},
		{name: "switches unreadable", form: form("type", welcome.Type, "state", "off"),
			listErr: errors.New("ssm down"), want: http.StatusBadGateway},
		{name: "set fails", form: form("type", welcome.Type, "state", "off"),
			setErr: errors.New("ssm down"), want: http.StatusBadGateway},
		{name: "set refuses the type", form: form("type", welcome.Type, "state", "off"),
			setErr: ErrUnknownType, want: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := &fakeSwitches{rows: []Switch{welcome, digest, typo}, listErr: tt.listErr, setErr: tt.setErr}
			h := New(Sources{Switches: sb}, quietOptions())
			req := httptest.NewRequest(http.MethodPost, "/_local/switches", strings.NewReader(tt.form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			rec := do(t, h, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d; want %d (%s)", rec.Code, tt.want, rec.Body)
			}
			if got := rec.Header().Get("Location"); got != tt.location {
				t.Errorf("Location %q; want %q", got, tt.location)
			}
			if got := sb.calls(); !reflect.DeepEqual(got, tt.sets) {
				t.Errorf("Set calls %v; want %v", got, tt.sets)
			}
		})
	}
}

func TestFlipThenPageShowsNewState(t *testing.T) {
	sb := &fakeSwitches{rows: []Switch{{Type: "email.partner-digest.v1"}}}
	h := New(Sources{Switches: sb}, quietOptions())
	req := httptest.NewRequest(http.MethodPost, "/_local/switches", strings.NewReader("type=email.partner-digest.v1&state=on"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := do(t, h, req)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("status %d", rec.Code)
	}
	back, _, _ := strings.Cut(rec.Header().Get("Location"), "#") // a browser keeps the fragment to itself
	_, body := get(t, h, back)
	if !strings.Contains(body, `<span class="switch on">on</span>`) || !strings.Contains(body, "turn off") {
		t.Fatalf("the page does not show the switch on:\n%s", body)
	}
}

func TestFlipBodyTooLarge(t *testing.T) {
	h := New(Sources{Switches: &fakeSwitches{}}, quietOptions())
	req := httptest.NewRequest(http.MethodPost, "/_local/switches", strings.NewReader("type="+strings.Repeat("a", maxForm)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if rec := do(t, h, req); rec.Code != http.StatusBadRequest {
		t.Fatalf("status %d; want 400", rec.Code)
	}
}

func TestLoopbackOnly(t *testing.T) {
	h := New(Sources{}, quietOptions())
	for hostport, want := range map[string]int{
		"127.0.0.1:3000": http.StatusOK, "127.0.0.2": http.StatusOK, "localhost": http.StatusOK,
		"LOCALHOST:3000": http.StatusOK, "[::1]:3000": http.StatusOK,
		"example.com": http.StatusForbidden, "10.0.0.1:3000": http.StatusForbidden,
		"localhost.evil.example": http.StatusForbidden, "": http.StatusForbidden,
	} {
		req := httptest.NewRequest(http.MethodGet, "/_local/", nil)
		req.Host = hostport
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %q: %d; want %d", hostport, rec.Code, want)
		}
	}
}

func TestAgo(t *testing.T) {
	p := pageData{Now: t0}
	tests := map[time.Duration]string{
		0: "just now", 12 * time.Second: "12s ago", 5 * time.Minute: "5m ago",
		3 * time.Hour: "3h ago", 72 * time.Hour: "3d ago", -30 * time.Second: "in 30s",
		// A job run at 3d, shown a moment later, is due in 3d (not 2d).
		-(72*time.Hour - time.Second): "in 3d", -(72*time.Hour - 3*time.Minute): "in 3d",
		-(59*time.Minute + 50*time.Second): "in 1h", -(90 * time.Second): "in 2m",
	}
	for d, want := range tests {
		if got := p.Ago(t0.Add(-d)); got != want {
			t.Errorf("Ago(now-%s) = %q; want %q", d, got, want)
		}
	}
	if got := p.Ago(time.Time{}); got != "" {
		t.Errorf("Ago(zero) = %q", got)
	}
}

func TestScannedJobToleratesMissingAndMistypedFields(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	tests := []struct {
		name string
		item map[string]types.AttributeValue
		want Job
	}{
		{"full", map[string]types.AttributeValue{
			"pk": s("job#j1"), "jobId": s("j1"), "type": s("t.v1"), "key": s("k"), "caller": s("c"), "state": s("Failed"),
			"attempts": n("3"), "lastErrorClass": s("permanent"), "lastOutcome": s("failed"), "lastReason": s("user gone"),
			"traceId": s("1-abc"), "createdAt": n("1764489600000"), "updatedAt": n("1764489601000"), "runAt": n("1764489600000"),
		}, Job{ID: "j1", Type: "t.v1", Key: "k", Caller: "c", State: "Failed", Attempts: 3, LastErrorClass: "permanent",
			LastOutcome: "failed", LastReason: "user gone", TraceID: "1-abc",
			CreatedAt: time.UnixMilli(1764489600000).UTC(), UpdatedAt: time.UnixMilli(1764489601000).UTC(), RunAt: time.UnixMilli(1764489600000).UTC()}},
		{"only the key", map[string]types.AttributeValue{"pk": s("job#j2")}, Job{ID: "j2"}},
		{"mistyped", map[string]types.AttributeValue{
			"pk": s("job#j3"), "jobId": n("7"), "attempts": s("three"), "createdAt": s("yesterday"), "type": &types.AttributeValueMemberBOOL{Value: true},
		}, Job{ID: "j3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scannedJob(tt.item); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("scannedJob = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestPrintable(t *testing.T) {
	if got := printable("a\nb\x7f" + strings.Repeat("ü", 100)); got != "a?b?"+strings.Repeat("ü", 76)+"…" {
		t.Fatalf("printable = %q", got)
	}
}

// The schedules section lists each schedule with its next fire, and says
// which make ticks and which are one-time jobs.
func TestPageListsSchedules(t *testing.T) {
	weekly := Schedule{Group: "runstwice-local-recurring", Name: "partner-digest-weekly", Expression: "cron(0 9 ? * MON *)",
		Timezone: "UTC", State: "ENABLED", Next: t0.Add(25 * time.Hour), Type: "email.partner-digest-fanout.v1", Tick: true}
	once := Schedule{Group: "runstwice-local-jobs", Name: "6f0c1c8e-3a4b-5d2e-9f10-2b7a1e5c4d33", Expression: "at(2026-12-01T09:00:00)",
		Timezone: "UTC", State: "ENABLED", Type: "email.welcome.v1"}
	code, body := get(t, New(Sources{Schedules: fakeSchedules{weekly, once}}, quietOptions()), "/_local/")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{`data-schedule="partner-digest-weekly"`, "cron(0 9 ? * MON *)", "2026-12-01 09:00:00.000Z", "in 25h",
		"email.partner-digest-fanout.v1 <span class=\"note\">tick</span>", "one-time job", "never again"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
