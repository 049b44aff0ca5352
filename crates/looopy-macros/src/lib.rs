//! Procedural macros for Looopy. Use them through `looopy_agent` (`#[looopy_agent::tool]`),
//! which re-exports them and provides the paths the generated code refers to.

use proc_macro::TokenStream;
use quote::{format_ident, quote};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, ExprLit, FnArg, GenericArgument, Ident, ItemFn, Lit, LitStr, Meta, Pat,
    PathArguments, ReturnType, Token, Type, parse_macro_input,
};

/// Turns an `async fn` into a tool; see `looopy_agent::tool` (the attribute) for the docs.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let options = parse_macro_input!(attr as ToolOptions);
    let function = parse_macro_input!(item as ItemFn);
    match expand(options, function) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

/// `#[tool(name = "…", description = "…", params(a = "…", b = "…"))]`, all optional.
#[derive(Default)]
struct ToolOptions {
    name: Option<LitStr>,
    description: Option<LitStr>,
    params: Vec<(Ident, LitStr)>,
}

impl Parse for ToolOptions {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut options = ToolOptions::default();
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated(input)?;
        for meta in metas {
            match &meta {
                Meta::NameValue(nv) if nv.path.is_ident("name") => {
                    options.name = Some(string_literal(&nv.value)?);
                }
                Meta::NameValue(nv) if nv.path.is_ident("description") => {
                    options.description = Some(string_literal(&nv.value)?);
                }
                Meta::List(list) if list.path.is_ident("params") => {
                    let entries = list.parse_args_with(
                        Punctuated::<syn::MetaNameValue, Token![,]>::parse_terminated,
                    )?;
                    for entry in entries {
                        let ident = entry.path.get_ident().cloned().ok_or_else(|| {
                            syn::Error::new(entry.path.span(), "expected a parameter name")
                        })?;
                        options.params.push((ident, string_literal(&entry.value)?));
                    }
                }
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        "expected `name = \"…\"`, `description = \"…\"` or `params(a = \"…\")`",
                    ));
                }
            }
        }
        Ok(options)
    }
}

fn string_literal(expr: &Expr) -> syn::Result<LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.clone()),
        other => Err(syn::Error::new(other.span(), "expected a string literal")),
    }
}

/// One parameter of the function: an argument the model supplies, or the tool context.
enum Param {
    Argument { name: Ident, ty: Box<Type> },
    Context,
}

fn expand(options: ToolOptions, function: ItemFn) -> syn::Result<proc_macro2::TokenStream> {
    let sig = &function.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span(),
            "#[tool] needs an `async fn`",
        ));
    }
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new(
            sig.generics.span(),
            "#[tool] functions cannot be generic",
        ));
    }
    let (output, error) = result_types(&sig.output)?;
    let params = sig
        .inputs
        .iter()
        .map(parameter)
        .collect::<syn::Result<Vec<_>>>()?;
    for (name, _) in &options.params {
        let known = params
            .iter()
            .any(|p| matches!(p, Param::Argument { name: n, .. } if n == name));
        if !known {
            return Err(syn::Error::new(
                name.span(),
                format!("`{name}` is not a parameter of this function"),
            ));
        }
    }

    let fn_name = &sig.ident;
    let vis = &function.vis;
    let tool_name = options
        .name
        .as_ref()
        .map(LitStr::value)
        .unwrap_or_else(|| fn_name.to_string());
    let description = match &options.description {
        Some(d) => d.value(),
        None => doc_text(&function.attrs),
    };
    if description.is_empty() {
        return Err(syn::Error::new(
            fn_name.span(),
            "a #[tool] needs a description: a doc comment or `description = \"…\"`",
        ));
    }
    let struct_name = Ident::new(&pascal_case(&fn_name.to_string()), fn_name.span());
    let args_name = format_ident!("{}Args", struct_name);

    let fields = params.iter().filter_map(|p| match p {
        Param::Argument { name, ty } => {
            let doc = options
                .params
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, d)| quote!(#[doc = #d]));
            Some(quote! { #doc pub #name: #ty })
        }
        Param::Context => None,
    });
    let call_args = params.iter().map(|p| match p {
        Param::Argument { name, .. } => quote!(args.#name),
        Param::Context => quote!(ctx),
    });
    let struct_doc = format!("The `{tool_name}` tool (generated by `#[tool]` from `{fn_name}`).");
    let args_doc = format!("Arguments of the `{tool_name}` tool.");

    Ok(quote! {
        #function

        #[doc = #struct_doc]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #struct_name;

        #[doc = #args_doc]
        #[derive(::looopy_agent::__private::serde::Deserialize, ::looopy_agent::__private::schemars::JsonSchema)]
        #[serde(crate = "::looopy_agent::__private::serde")]
        #[schemars(crate = "::looopy_agent::__private::schemars")]
        #vis struct #args_name {
            #(#fields,)*
        }

        impl ::looopy_agent::tool::Tool for #struct_name {
            const NAME: &'static str = #tool_name;
            type Args = #args_name;
            type Output = #output;
            type Error = #error;

            fn description(&self) -> ::std::string::String {
                ::std::string::String::from(#description)
            }

            #[allow(unused_variables)]
            async fn call(
                &self,
                args: #args_name,
                ctx: ::looopy_agent::tool::ToolContext,
            ) -> ::std::result::Result<#output, #error> {
                #fn_name(#(#call_args),*).await
            }
        }
    })
}

/// `Result<O, E>` → (O, E).
fn result_types(output: &ReturnType) -> syn::Result<(Type, Type)> {
    let error = || {
        syn::Error::new(
            output.span(),
            "a #[tool] returns `Result<Output, Error>` (Error: Display, e.g. ToolFailure)",
        )
    };
    let ReturnType::Type(_, ty) = output else {
        return Err(error());
    };
    let Type::Path(path) = ty.as_ref() else {
        return Err(error());
    };
    let last = path.path.segments.last().ok_or_else(error)?;
    if last.ident != "Result" {
        return Err(error());
    }
    let PathArguments::AngleBracketed(generics) = &last.arguments else {
        return Err(error());
    };
    let mut types = generics.args.iter().filter_map(|arg| match arg {
        GenericArgument::Type(t) => Some(t.clone()),
        _ => None,
    });
    match (types.next(), types.next(), types.next()) {
        (Some(o), Some(e), None) => Ok((o, e)),
        _ => Err(error()),
    }
}

fn parameter(input: &FnArg) -> syn::Result<Param> {
    let FnArg::Typed(typed) = input else {
        return Err(syn::Error::new(
            input.span(),
            "a #[tool] is a free function, not a method",
        ));
    };
    let is_context = matches!(
        typed.ty.as_ref(),
        Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "ToolContext")
    );
    if is_context {
        return Ok(Param::Context);
    }
    match typed.pat.as_ref() {
        Pat::Ident(ident) if ident.by_ref.is_none() && ident.subpat.is_none() => {
            Ok(Param::Argument {
                name: ident.ident.clone(),
                ty: typed.ty.clone(),
            })
        }
        other => Err(syn::Error::new(
            other.span(),
            "#[tool] parameters must be plain names (`a: f64`)",
        )),
    }
}

/// The doc comment's text, lines trimmed and joined.
fn doc_text(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => string_literal(&nv.value).ok().map(|s| s.value()),
            _ => None,
        })
        .map(|line| line.trim().to_string())
        .collect();
    lines.join("\n").trim().to_string()
}

fn pascal_case(snake: &str) -> String {
    let name: String = snake
        .split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect();
    if name.is_empty() {
        return "UnnamedTool".to_string();
    }
    name
}
