package email

import (
	"bytes"
	"embed"
	"fmt"
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
)

//go:embed templates/*.txt templates/*.html
var templateFS embed.FS

// templateData is what a template sees. It holds no secret but Link, whose
// token exists only in the rendered mail.
type templateData struct {
	Name        string
	Link        string
	RoleCode    string
	CountryCode string
	DigestID    string
	ExpiresIn   string
}

// mailTemplate renders one job type's mail: subject and text from a
// text/template file (<name>.txt), the HTML body from an html/template file
// (<name>.html), which escapes everything it inserts.
type mailTemplate struct {
	text *texttemplate.Template
	html *htmltemplate.Template
}

func loadTemplate(name string) (mailTemplate, error) {
	t, err := texttemplate.New(name).Option("missingkey=error").ParseFS(templateFS, "templates/"+name+".txt")
	if err != nil {
		return mailTemplate{}, fmt.Errorf("email: template %s: %w", name, err)
	}
	h, err := htmltemplate.New(name).Option("missingkey=error").ParseFS(templateFS, "templates/"+name+".html")
	if err != nil {
		return mailTemplate{}, fmt.Errorf("email: template %s: %w", name, err)
	}
	for _, def := range []string{"subject", "text"} {
		if t.Lookup(def) == nil {
			return mailTemplate{}, fmt.Errorf("email: template %s.txt defines no %q", name, def)
		}
	}
	if h.Lookup("html") == nil {
		return mailTemplate{}, fmt.Errorf("email: template %s.html defines no \"html\"", name)
	}
	return mailTemplate{text: t, html: h}, nil
}

// render returns the subject, text and HTML bodies.
func (m mailTemplate) render(d templateData) (subject, text, html string, err error) {
	var b bytes.Buffer
	if err := m.text.ExecuteTemplate(&b, "subject", d); err != nil {
		return "", "", "", fmt.Errorf("email: render subject: %w", err)
	}
	// A subject is one line: a display name can never inject a header.
	subject = strings.Join(strings.Fields(b.String()), " ")
	b.Reset()
	if err := m.text.ExecuteTemplate(&b, "text", d); err != nil {
		return "", "", "", fmt.Errorf("email: render text: %w", err)
	}
	text = strings.TrimLeft(b.String(), "\n")
	b.Reset()
	if err := m.html.ExecuteTemplate(&b, "html", d); err != nil {
		return "", "", "", fmt.Errorf("email: render html: %w", err)
	}
	return subject, text, b.String(), nil
}
