package console

import (
	"fmt"
	"html/template"

	"github.com/signoff-dev/signoff/show"
)

// pageNames are the pages, each a template of its own over the layout.
var pageNames = []string{"login", "inbox", "run", "ops", "problem"}

// parsePages parses each page with the layout. Every string an agent, a
// requester or a target wrote goes through inert in the templates, and
// html/template escapes what it prints, so no such string can open a tag.
func parsePages(prefix string) (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"inert": show.Inert,
		"str":   show.String,
		"short": func(h string) string {
			if len(h) > 12 {
				return h[:12] + "…"
			}
			return h
		},
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse page %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}
